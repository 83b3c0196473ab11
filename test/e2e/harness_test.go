package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the coxswain binary built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "coxswain-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	binary = filepath.Join(dir, "coxswain")
	args := []string{"build", "-o", binary}
	if raceBuild {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/coxswain")
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building coxswain: %v\n", err)
		return 1
	}
	return m.Run()
}

// eventually polls f until it returns nil, failing the test with f's last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// handedOut are the ports freePort returned in this process: the kernel may give a port it just
// took back to the next bind of port 0, and two ports of one test (a listener's and the admin
// address) must differ (TestExamplesIngress once got the same port for both).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a loopback TCP port that was free a moment ago and that no other call in this
// process returned.
func freePort(t *testing.T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port
		}
	}
}

// echo is what a test backend answers: who it is and what it received.
type echo struct {
	Backend string              `json:"backend"`
	Method  string              `json:"method"`
	Host    string              `json:"host"`
	Path    string              `json:"path"`
	Query   string              `json:"query"`
	Headers map[string][]string `json:"headers"`
}

// backend is a real HTTP server on loopback that answers with an echo.
type backend struct {
	name string
	port int
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Backend", name)
		_ = json.NewEncoder(w).Encode(echo{
			Backend: name, Method: r.Method, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, Headers: r.Header,
		})
	}))
	t.Cleanup(srv.Close)
	return &backend{name: name, port: srv.Listener.Addr().(*net.TCPAddr).Port}
}

// syncBuffer collects a process's output; the process writes while tests read.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is a running `coxswain serve`.
type server struct {
	t     *testing.T
	dir   string
	admin string
	cmd   *exec.Cmd
	log   *syncBuffer
	done  chan error
}

// startServe writes files into a new temp dir, starts `coxswain serve -f DIR` (with extra flags)
// and waits until it is ready.
func startServe(t *testing.T, files map[string]string, extra ...string) *server {
	t.Helper()
	return startServeWith(t, binary, files, extra...)
}

// startServeWith is startServe with another build of coxswain (a custom distribution).
func startServeWith(t *testing.T, bin string, files map[string]string, extra ...string) *server {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	s := &server{t: t, dir: dir, admin: fmt.Sprintf("127.0.0.1:%d", freePort(t)), log: &syncBuffer{}, done: make(chan error, 1)}
	s.cmd = exec.Command(bin, append([]string{"serve", "-f", dir, "--admin-address", s.admin, "--debounce", "50ms", "--log-level", "debug"}, extra...)...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	t.Cleanup(s.stop)
	eventually(t, 30*time.Second, "coxswain serve ready", func() error {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("coxswain serve exited early (%v); log:\n%s", err, s.log)
		default:
		}
		body, code, err := s.adminGet("/readyz")
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("/readyz %d %s", code, body)
		}
		return nil
	})
	return s
}

// stop sends SIGTERM and expects a clean exit; the log is printed when the test failed.
func (s *server) stop() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("coxswain serve exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		err := <-s.done
		s.t.Errorf("coxswain serve did not stop within 30s of SIGTERM; killed (%v)", err)
	}
	if s.t.Failed() {
		s.t.Logf("coxswain serve log:\n%s", s.log)
	}
}

func (s *server) adminGet(path string) (string, int, error) {
	resp, err := http.Get("http://" + s.admin + path)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

// status is the part of /status the tests read.
type status struct {
	Version    string `json:"version"`
	ApplyError string `json:"applyError"`
	Unbound    []struct {
		Reason   string   `json:"reason"`
		Gateways []string `json:"gateways"`
	} `json:"unboundListeners"`
	Report struct {
		Version  string `json:"version"`
		Problems []struct {
			Source string `json:"source"`
			Object string `json:"object"`
			Field  string `json:"field"`
			Reason string `json:"reason"`
		} `json:"problems"`
		LoadErrors []struct {
			Source struct {
				File string `json:"file"`
			} `json:"source"`
			Reason string `json:"reason"`
			Field  string `json:"field"`
		} `json:"loadErrors"`
	} `json:"report"`
}

func (s *server) status() status {
	s.t.Helper()
	body, code, err := s.adminGet("/status")
	if err != nil || code != http.StatusOK {
		s.t.Fatalf("/status: %d %v", code, err)
	}
	var st status
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		s.t.Fatalf("/status: %v in %s", err, body)
	}
	return st
}

// write replaces a manifest file in place.
func (s *server) write(name, content string) { writeFile(s.t, filepath.Join(s.dir, name), content) }

// replace replaces a manifest file the way most editors save: write a temp file, rename it over.
func (s *server) replace(name, content string) {
	tmp := filepath.Join(s.dir, "."+name+".tmp")
	writeFile(s.t, tmp, content)
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		s.t.Fatal(err)
	}
}

// awaitLog waits until the process log contains all of the substrings on one line.
func (s *server) awaitLog(what string, subs ...string) {
	s.t.Helper()
	eventually(s.t, 20*time.Second, what, func() error {
		for _, line := range strings.Split(s.log.String(), "\n") {
			ok := true
			for _, sub := range subs {
				ok = ok && strings.Contains(line, sub)
			}
			if ok {
				return nil
			}
		}
		return fmt.Errorf("no log line contains all of %q", subs)
	})
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// request is one test request.
type request struct {
	method  string
	url     string
	host    string
	headers map[string]string
}

// result is what came back.
type result struct {
	code   int
	header http.Header
	echo   *echo // nil when the body is not an echo
	body   string
}

// noRedirect is a client that returns redirects instead of following them.
var noRedirect = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func do(ctx context.Context, c *http.Client, r request) (*result, error) {
	method := r.method
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, r.url, nil)
	if err != nil {
		return nil, err
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	res := &result{code: resp.StatusCode, header: resp.Header, body: string(b)}
	var e echo
	if json.Unmarshal(b, &e) == nil && e.Backend != "" {
		res.echo = &e
	}
	return res, nil
}

// backendOf returns the backend that answered, or a description of what came back instead.
func (r *result) backendOf() string {
	if r.echo != nil {
		return r.echo.Backend
	}
	return fmt.Sprintf("(status %d: %.80q)", r.code, r.body)
}

var errNotYet = errors.New("not yet")
