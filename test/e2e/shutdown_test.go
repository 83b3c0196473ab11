package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// slowBackend answers /slow only once release is closed, and signals each /slow arrival; every
// other path at once.
func slowBackend(t *testing.T) (b *backend, arrived <-chan struct{}, release chan struct{}) {
	t.Helper()
	in := make(chan struct{}, 8)
	release = make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			in <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "done "+r.URL.Path)
	}))
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		srv.Close()
	})
	return &backend{name: "slow", port: srv.Listener.Addr().(*net.TCPAddr).Port}, in, release
}

// startSlow serves a route to a slow backend, with the given drain bound, and waits until the
// route answers.
func startSlow(t *testing.T, drain string) (s *server, addr string, arrived <-chan struct{}, release chan struct{}) {
	t.Helper()
	b, arrived, release := slowBackend(t)
	port := freePort(t)
	s = startServe(t, map[string]string{
		"gateway.yaml":  gatewayClassYAML + "---\n" + gatewayYAML(listener{name: "http", protocol: "HTTP", port: port}),
		"backends.yaml": serviceYAML(b),
		"route.yaml": routeYAML("slow", "", `  rules:
  - backendRefs: [{name: slow, port: 80}]
`),
	}, "--shutdown-timeout", drain)
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	eventually(t, 20*time.Second, "the route answers", func() error {
		resp, err := http.Get("http://" + addr + "/fast")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	return s, addr, arrived, release
}

// slowGet sends GET /slow on a connection of its own; the result arrives on the channel.
func slowGet(addr string) <-chan error {
	done := make(chan error, 1)
	go func() {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
		resp, err := c.Get("http://" + addr + "/slow")
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err == nil && (resp.StatusCode != http.StatusOK || string(body) != "done /slow") {
			err = fmt.Errorf("status %d, body %q", resp.StatusCode, body)
		}
		done <- err
	}()
	return done
}

// exited waits up to limit for the process to exit and returns its error; it puts the result
// back for the harness's own stop.
func (s *server) exited(t *testing.T, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-s.done:
		s.done <- err
		return err
	case <-time.After(limit):
		t.Fatalf("coxswain serve still running %s after SIGTERM", limit)
		return nil
	}
}

// TestSIGTERMDrains: on SIGTERM, coxswain serve stops accepting at once, lets the request in
// flight finish with its 200, and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	s, addr, arrived, release := startSlow(t, "20s")
	result := slowGet(addr)
	<-arrived // the request is at the backend: in flight through the proxy
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "new connections refused after SIGTERM", func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = conn.Close()
			return errors.New("a new connection was accepted")
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return err
		}
		return nil
	})
	select {
	case err := <-s.done:
		s.done <- err
		t.Fatalf("coxswain serve exited (%v) with a request in flight", err)
	case err := <-result:
		t.Fatalf("the in-flight request ended before its backend answered: %v", err)
	default:
	}
	start := time.Now()
	close(release)
	if err := <-result; err != nil {
		t.Fatalf("the in-flight request: %v", err)
	}
	if err := s.exited(t, 10*time.Second); err != nil {
		t.Fatalf("coxswain serve exited with %v after draining", err)
	}
	// Under -race the binary sleeps 1s at exit (the race runtime's atexit_sleep_ms).
	t.Logf("exited %s after the last request finished", time.Since(start).Round(time.Millisecond))
}

// TestSIGTERMDrainBound: a request that outlives --shutdown-timeout is cut off, and the process
// still exits 0, within the bound.
func TestSIGTERMDrainBound(t *testing.T) {
	s, addr, arrived, _ := startSlow(t, "1s")
	result := slowGet(addr)
	<-arrived
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := s.exited(t, 8*time.Second); err != nil {
		t.Fatalf("coxswain serve exited with %v", err)
	}
	took := time.Since(start)
	if took < time.Second {
		t.Errorf("exited %s after SIGTERM, before the 1s drain bound, with a request in flight", took)
	}
	if err := <-result; err == nil {
		t.Error("the request that outlived the drain completed; want its connection closed")
	}
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
}
