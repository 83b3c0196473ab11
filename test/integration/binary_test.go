package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// coxswainBinary builds cmd/coxswain once per test process. The network namespace has no route
// out, so the module cache must already hold every dependency (GOPROXY=off fails fast otherwise).
func coxswainBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "coxswain-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "coxswain")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/coxswain-labs/coxswain/cmd/coxswain")
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/coxswain: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// process is a `coxswain controller` child process.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProcess runs `coxswain controller` against the env with the given extra flags. Its output
// is logged when the test fails.
func startProcess(t testing.TB, e *env.Env, name string, args ...string) *process {
	t.Helper()
	return startBinary(t, e, coxswainBinary(t), name, args...)
}

// startBinary is startProcess for another build of coxswain (a custom distribution).
func startBinary(t testing.TB, e *env.Env, bin, name string, args ...string) *process {
	t.Helper()
	base := []string{"controller", "--in-process-proxy", "--kubeconfig", e.WriteKubeConfig(t), "--status-address", gatewayIP,
		"--health-address", "127.0.0.1:0", "--log-format", "console", "--holdoff", "20ms"}
	p := &process{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append(base, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, tail(p.out.String(), 8000))
		}
	})
	return p
}

func (p *process) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// wait waits for the process to exit.
func (p *process) wait(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(waitFor):
		t.Fatalf("%s did not exit", p.name)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := strings.IndexByte(s[len(s)-n:], '\n')
	return s[len(s)-n+i+1:]
}

// buildDistribution builds a custom distribution with the builder, as a user would, from the
// module cache only (the test's network namespace has no route out).
func buildDistribution(t testing.TB, args ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "coxswain-custom")
	cmd := exec.Command("go", append([]string{"run", "./cmd/coxswain-build", "--offline", "--output", out}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("coxswain-build %v: %v\n%s", args, err, b)
	}
	return out
}
