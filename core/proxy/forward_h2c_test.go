package proxy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// newH2CBackendFunc serves h with cleartext HTTP/2 only (prior knowledge); accepted counts the
// connections it accepts.
func newH2CBackendFunc(t testing.TB, name string, h http.HandlerFunc, accepted *atomic.Int64) (*testBackend, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return &testBackend{name: name, srv: srv, port: portOf(t, srv.Listener.Addr().String())}, srv
}

// TestH2CForwarder drives the engine's own HTTP/2 client (h2c clusters) with net/http's HTTP/2
// server as the backend: bodies past every flow-control window both ways, trailers both ways
// (request trailers from HTTP/2 clients),
// header hygiene, many streams at once on one connection, a backend that drops its connections,
// and a client that goes away mid-request.
func TestH2CForwarder(t *testing.T) {
	var accepted atomic.Int64
	canceled := make(chan struct{}, 1)
	be, srv := newH2CBackendFunc(t, "h2c", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/echo": // the body back, its hash in a trailer, the request's trailer echoed
			w.Header().Set("Trailer", "X-Sum")
			h := sha256.New()
			if _, err := io.Copy(io.MultiWriter(w, h), r.Body); err != nil {
				return
			}
			w.Header().Set("X-Sum", fmt.Sprintf("%x", h.Sum(nil)))
			w.Header().Set(http.TrailerPrefix+"X-Req-Trailer", r.Trailer.Get("X-Client-Trailer"))
		case "/headers":
			w.Header().Set("X-Got-Te", r.Header.Get("Te"))
			w.Header().Set("X-Got-Secret", r.Header.Get("X-Secret"))
			w.Header().Set("X-Got-XFF", r.Header.Get("X-Forwarded-For"))
			w.Header().Set("X-Got-Host", r.Host)
		case "/wait": // holds the request until the proxy resets it
			w.WriteHeader(200)
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
			canceled <- struct{}{}
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}, &accepted)
	cl := cluster("be", be)
	cl.Protocol = irv1.Cluster_H2C
	l := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
	addr := addrOf(t, p, l.Name)
	h2 := newClient(addr, func(tr *http.Transport) {
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		tr.Protocols = &pr
	})
	h1 := newClient(addr, nil)

	t.Run("large bodies and trailers both ways", func(t *testing.T) {
		body := bytes.Repeat([]byte("0123456789abcdef"), 3<<18) // 12 MiB: past every window
		want := fmt.Sprintf("%x", sha256.Sum256(body))
		for name, c := range map[string]*client{"h2": h2, "h1": h1} {
			req, _ := http.NewRequest(http.MethodPost, hostURL("http", "example.com", "/echo"), io.NopCloser(bytes.NewReader(body)))
			req.Trailer = http.Header{"X-Client-Trailer": nil}
			req.Body = &trailerBody{r: bytes.NewReader(body), tr: req.Trailer, val: "sent-" + name}
			r := must(t, c.do(req))
			if r.status != 200 || len(r.body) != len(body) || fmt.Sprintf("%x", sha256.Sum256([]byte(r.body))) != want {
				t.Fatalf("%s: status %d, %d bytes back", name, r.status, len(r.body))
			}
			// The engine's HTTP/1.1 server drops request trailers (validated, not forwarded).
			wantReq := "sent-" + name
			if name == "h1" {
				wantReq = ""
			}
			if r.trailer.Get("X-Sum") != want || r.trailer.Get("X-Req-Trailer") != wantReq {
				t.Fatalf("%s: trailers %v", name, r.trailer)
			}
		}
	})
	t.Run("a small body that arrived whole goes with the header", func(t *testing.T) {
		// The own HTTP/2 server has the whole body when the handler starts: the forwarder sends
		// it with the request's header from the handler's goroutine (h2client's Open with end).
		for _, size := range []int{1, 5, 16 << 10, 16<<10 + 1} {
			body := bytes.Repeat([]byte("g"), size)
			req, _ := http.NewRequest(http.MethodPost, hostURL("http", "example.com", "/echo"), bytes.NewReader(body))
			r := must(t, h2.do(req))
			if r.status != 200 || r.body != string(body) || r.trailer.Get("X-Sum") != fmt.Sprintf("%x", sha256.Sum256(body)) {
				t.Fatalf("%d bytes: status %d, %d bytes back, trailers %v", size, r.status, len(r.body), r.trailer)
			}
		}
	})
	t.Run("hop-by-hop headers dropped, TE trailers kept, X-Forwarded-For appended", func(t *testing.T) {
		r := must(t, h1.get(hostURL("http", "example.com", "/headers"), "Connection", "X-Secret", "X-Secret", "s",
			"Te", "trailers", "X-Forwarded-For", "192.0.2.1"))
		if r.header.Get("X-Got-Secret") != "" || r.header.Get("X-Got-Te") != "trailers" ||
			r.header.Get("X-Got-XFF") != "192.0.2.1, 127.0.0.1" || r.header.Get("X-Got-Host") != "example.com" {
			t.Fatalf("backend saw %v", r.header)
		}
	})
	t.Run("concurrent streams share one connection", func(t *testing.T) {
		before := accepted.Load()
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for range 100 {
			wg.Go(func() {
				r := h2.get(hostURL("http", "example.com", "/"))
				if r.err != nil || r.body != "ok" {
					errs <- fmt.Errorf("%d %q %v", r.status, r.body, r.err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := accepted.Load() - before; n > 0 {
			t.Errorf("%d new upstream connections for 100 concurrent requests on a warm one", n)
		}
	})
	t.Run("a dropped upstream connection is replaced", func(t *testing.T) {
		srv.CloseClientConnections()
		eventually(t, "a request after the drop", func() bool {
			return h1.get(hostURL("http", "example.com", "/")).body == "ok"
		})
	})
	t.Run("a client that goes away resets the upstream stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hostURL("http", "example.com", "/wait"), nil)
		resp, err := h2.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		_ = resp.Body.Close()
		select {
		case <-canceled:
		case <-time.After(10 * time.Second):
			t.Fatal("the backend's request was not canceled")
		}
	})
}

// trailerBody reads r, then sets the trailer X-Client-Trailer, as a client does once its body is
// sent.
type trailerBody struct {
	r   io.Reader
	tr  http.Header
	val string
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		b.tr.Set("X-Client-Trailer", b.val)
	}
	return n, err
}

func (b *trailerBody) Close() error { return nil }

// TestH2CGoAway: a backend shutting down gracefully (GOAWAY) finishes the request in flight on
// the old connection, and the next request goes to a new connection (here a new backend process
// on the same port).
func TestH2CGoAway(t *testing.T) {
	var accepted atomic.Int64
	entered, release := make(chan struct{}, 1), make(chan struct{})
	handler := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}
	be, srv := newH2CBackendFunc(t, "be", handler, &accepted)
	addr := srv.Listener.Addr().String()
	cl := cluster("be", be)
	cl.Protocol = irv1.Cluster_H2C
	l := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
	c := newClient(addrOf(t, p, l.Name), nil)

	slow := make(chan result, 1)
	go func() { slow <- c.get(hostURL("http", "example.com", "/slow")) }()
	<-entered
	shut := make(chan error, 1)
	go func() { shut <- srv.Config.Shutdown(context.Background()) }()
	eventually(t, "the backend to stop accepting", func() bool { return dialFails(addr) })
	close(release)
	if r := <-slow; r.err != nil || r.body != "done" {
		t.Fatalf("request in flight during GOAWAY: %q %v", r.body, r.err)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	// A new backend on the same port: the proxy must dial it rather than reuse the old connection.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var pr http.Protocols
	pr.SetUnencryptedHTTP2(true)
	srv2 := &http.Server{Handler: http.HandlerFunc(handler), Protocols: &pr}
	go func() { _ = srv2.Serve(ln) }()
	t.Cleanup(func() { _ = srv2.Close() })
	if r := must(t, c.get(hostURL("http", "example.com", "/"))); r.status != 200 || r.body != "done" {
		t.Fatalf("after the restart: %d %q", r.status, r.body)
	}
}

func dialFails(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return true
	}
	_ = c.Close()
	return false
}
