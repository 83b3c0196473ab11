package env

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RestartAPIServer kills the kube-apiserver (SIGKILL, as a crash or an OOM kill would: its
// graceful SIGTERM shutdown waits up to a minute for requests to drain) and starts it again with
// the very same command line: flags, serving certificates, client
// CA and etcd stay, so every client's config stays valid and every object is still there. It
// returns once the new process answers /readyz, and how long the API was unreachable.
//
// envtest has no restart that keeps its certificates (its Start generates fresh ones), so the
// process is found among the test binary's children and relaunched from its /proc cmdline.
func (e *Env) RestartAPIServer(t testing.TB) time.Duration {
	t.Helper()
	pid, args, err := childProcess("kube-apiserver")
	if err != nil {
		t.Fatalf("integration env: %v", err)
	}
	stopped := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("integration env: killing kube-apiserver: %v", err)
	}
	deadline := time.Now().Add(startTimeout)
	for syscall.Kill(pid, 0) == nil { // envtest's Wait reaps it
		if time.Now().After(deadline) {
			t.Fatalf("integration env: kube-apiserver %d still running %s after SIGKILL", pid, startTimeout)
		}
		time.Sleep(50 * time.Millisecond) // polling a pid: there is nothing to wait on for another's child
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = e.out, e.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("integration env: restarting kube-apiserver: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		err := e.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
		if err == nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("integration env: restarted kube-apiserver exited; output (tail):\n%s", e.out)
		case <-ctx.Done():
			t.Fatalf("integration env: restarted kube-apiserver not ready: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return time.Since(stopped)
}

// childProcess finds this process's child running binary name: its pid and command line.
func childProcess(name string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	self := os.Getpid()
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after its closing parenthesis.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 || fields[1] != strconv.Itoa(self) {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == name {
			return pid, args, nil
		}
	}
	return 0, nil, fmt.Errorf("no child process %s of pid %d", name, self)
}
