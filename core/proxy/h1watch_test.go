package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// cancelBackend is a net/http upstream that reports each request's arrival and whether its context
// was cancelled (net/http cancels it when the proxy closes the connection), and counts connections.
// /hang waits for the cancellation; /stream sends a first line, then waits; /hold waits for release;
// anything else answers "ok".
type cancelBackend struct {
	*testBackend
	arrived  chan string
	canceled chan string
	release  chan struct{}
	conns    atomic.Int64
}

func newCancelBackend(t *testing.T) *cancelBackend {
	t.Helper()
	b := &cancelBackend{arrived: make(chan string, 16), canceled: make(chan string, 16), release: make(chan struct{})}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/hang":
		case "/stream":
			_, _ = io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
		case "/hold":
			b.arrived <- r.URL.Path
			<-b.release
			_, _ = io.WriteString(w, "held "+r.URL.RawQuery)
			return
		default:
			w.Header().Set("X-Got-Length", r.Header.Get("Content-Length"))
			_, _ = io.WriteString(w, "ok "+string(body))
			return
		}
		b.arrived <- r.URL.Path
		select {
		case <-r.Context().Done():
			b.canceled <- r.URL.Path
		case <-time.After(20 * time.Second):
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	b.testBackend = &testBackend{name: "cb", srv: srv, port: portOf(t, srv.Listener.Addr().String())}
	return b
}

func await(t *testing.T, what string, ch <-chan string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// A client that goes away while its request is served cancels the upstream request (the backend
// sees its context end) and the upstream connection is closed, not pooled.
func TestH1ClientGoneCancelsUpstream(t *testing.T) {
	cases := []struct {
		name    string
		tls     bool
		timeout uint32 // route request timeout in ms (the exchange is guarded by context.AfterFunc)
		req     string
		stream  bool // read the response header and first line before leaving
	}{
		{name: "GET waiting for the header", req: "GET /hang HTTP/1.1\r\nHost: example.com\r\n\r\n"},
		{name: "POST with a body", req: "POST /hang HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello"},
		{name: "POST chunked", req: "POST /hang HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
		{name: "streamed response", req: "GET /stream HTTP/1.1\r\nHost: example.com\r\n\r\n", stream: true},
		{name: "route timeout", timeout: 30_000, req: "GET /hang HTTP/1.1\r\nHost: example.com\r\n\r\n"},
		{name: "route timeout, streamed", timeout: 30_000, req: "GET /stream HTTP/1.1\r\nHost: example.com\r\n\r\n", stream: true},
		{name: "TLS", tls: true, req: "GET /hang HTTP/1.1\r\nHost: example.com\r\n\r\n"},
		{name: "TLS streamed", tls: true, req: "GET /stream HTTP/1.1\r\nHost: example.com\r\n\r\n", stream: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			be := newCancelBackend(t)
			rt := route("r", "/", backend("cb", 1))
			if tc.timeout > 0 {
				rt.Timeouts = &irv1.Timeouts{RequestMs: tc.timeout}
			}
			p := newProxy(t)
			var l *irv1.Listener
			var secrets []*irv1.Secret
			if tc.tls {
				l = httpsListener(0, tlsServer("", []string{"ns/c"}, vhost("", rt)))
				secrets = append(secrets, secret(t, "ns/c", "c", "example.com"))
			} else {
				l = httpListener(0, server("", vhost("", rt)))
			}
			apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("cb", be.testBackend)}, secrets...))
			addr := addrOf(t, p, l.Name)

			c := dialClient(t, addr, tc.tls)
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			await(t, "the request upstream", be.arrived)
			if tc.stream {
				br := bufio.NewReader(c)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "first\n" {
					t.Fatalf("first line %q, %v", line, err)
				}
			}
			_ = c.Close()
			await(t, "the upstream request's cancellation", be.canceled)

			// The connection of the cancelled request was not pooled: the next request dials.
			before := be.conns.Load()
			r := must(t, newClient(addr, nil).get(hostURL(scheme(tc.tls), "example.com", "/ok")))
			if r.status != 200 || r.body != "ok " {
				t.Fatalf("next request: %d %q", r.status, r.body)
			}
			if got := be.conns.Load(); got != before+1 {
				t.Fatalf("upstream connections %d -> %d: the cancelled one was reused", before, got)
			}
		})
	}
}

func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

func dialClient(t *testing.T, addr string, useTLS bool) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if useTLS {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{ServerName: "example.com", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}) //nolint:gosec // test
	} else {
		c, err = net.DialTimeout("tcp", addr, 5*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	return c
}

// A slow request from a client that stays, pipelining its next request while the first is held
// (after the watch started), gets both answers in order on one connection, and the upstream
// connection is pooled: the watch only peeks.
func TestH1ClientWatchKeepsPipelining(t *testing.T) {
	be := newCancelBackend(t)
	l := httpListener(0, server("", vhost("", route("r", "/", backend("cb", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("cb", be.testBackend)}))
	c := dialClient(t, addrOf(t, p, l.Name), false)
	br := bufio.NewReader(c)
	read := func(want string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("status %d body %q, want %q", resp.StatusCode, b, want)
		}
	}
	_, _ = io.WriteString(c, "GET /hold?1 HTTP/1.1\r\nHost: a\r\n\r\n")
	await(t, "the first request upstream", be.arrived)
	time.Sleep(100 * time.Millisecond) // ordering only: the watch (armed after 20 ms) is running by now
	_, _ = io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc")
	be.release <- struct{}{}
	read("held 1")
	read("ok abc")
	_, _ = io.WriteString(c, "GET /last HTTP/1.1\r\nHost: a\r\n\r\n")
	read("ok ")
	if n := be.conns.Load(); n != 1 {
		t.Fatalf("%d upstream connections, want 1", n)
	}
}

// A watched request leaves the connection's header timeout in force for the next request.
func TestH1ClientWatchKeepsHeaderTimeout(t *testing.T) {
	be := newCancelBackend(t)
	l := httpListener(0, server("", vhost("", route("r", "/", backend("cb", 1)))))
	p := newProxyLimits(t, 200*time.Millisecond)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("cb", be.testBackend)}))
	c := dialClient(t, addrOf(t, p, l.Name), false)
	_, _ = io.WriteString(c, "GET /hold HTTP/1.1\r\nHost: a\r\n\r\n")
	await(t, "the request upstream", be.arrived)
	time.Sleep(100 * time.Millisecond) // ordering only: let the watch run
	be.release <- struct{}{}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	// A header that never ends is cut off by the header timeout.
	start := time.Now()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n")
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the server answered a header that never ended")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("connection lived %s after an unfinished header", d)
	}
}

func newProxyLimits(t *testing.T, readHeader time.Duration) *proxy.Proxy {
	t.Helper()
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: registry(), Limits: proxy.Limits{ReadHeaderTimeout: readHeader}})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// Over TLS, a watch taken back by a read deadline (the request ended while the client stayed
// silent) leaves the TLS connection usable for the next request.
func TestH1ClientWatchTLS(t *testing.T) {
	be := newCancelBackend(t)
	l := httpsListener(0, tlsServer("", []string{"ns/c"}, vhost("", route("r", "/", backend("cb", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("cb", be.testBackend)}, secret(t, "ns/c", "c", "example.com")))
	c := dialClient(t, addrOf(t, p, l.Name), true)
	br := bufio.NewReader(c)
	for i := range 3 {
		_, _ = io.WriteString(c, "GET /hold?"+string(rune('a'+i))+" HTTP/1.1\r\nHost: a\r\n\r\n")
		await(t, "the request upstream", be.arrived)
		time.Sleep(60 * time.Millisecond) // ordering only: the watch (armed after 20 ms) is running by now
		be.release <- struct{}{}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if want := "held " + string(rune('a'+i)); resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("request %d: status %d body %q, want %q", i, resp.StatusCode, b, want)
		}
	}
}

// Requests whose body goes the stdlib way (over 64 KiB, or Expect: 100-continue) are watched too
// once the transport has read the body: the upstream request is cancelled when the client leaves.
func TestH1ClientGoneStdlibPath(t *testing.T) {
	big := strings.Repeat("x", 100<<10)
	for _, tc := range []struct{ name, req string }{
		{"100 KiB body", "POST /hang HTTP/1.1\r\nHost: a\r\nContent-Length: 102400\r\n\r\n" + big},
		{"expect continue", "POST /hang HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			be := newCancelBackend(t)
			l := httpListener(0, server("", vhost("", route("r", "/", backend("cb", 1)))))
			p := newProxy(t)
			apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("cb", be.testBackend)}))
			c := dialClient(t, addrOf(t, p, l.Name), false)
			_, _ = io.WriteString(c, tc.req)
			await(t, "the request upstream", be.arrived)
			_ = c.Close()
			await(t, "the upstream request's cancellation", be.canceled)
		})
	}
}
