//go:build linux

package proxy_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// requestPaths are the three ways the engine reaches an HTTP endpoint: the HTTP/1.1 fast path,
// the stdlib reverse proxy (a body too large for the fast path to buffer), and the h2c client.
var requestPaths = []struct {
	name  string
	proto irv1.Cluster_Protocol
	req   func(url string) *http.Request
}{
	{"h1-fast", irv1.Cluster_HTTP1, func(url string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, url, nil)
		return r
	}},
	{"h1-stdlib", irv1.Cluster_HTTP1, func(url string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(make([]byte, 100<<10)))
		return r
	}},
	{"h2c", irv1.Cluster_H2C, func(url string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, url, nil)
		return r
	}},
}

// A cluster's connect timeout bounds the connect to an endpoint that never completes the
// handshake: 502 after it, although the proxy's default and the route's backend timeout are much
// longer. A route deadline shorter than the connect timeout still ends the request first, as 504.
func TestClusterConnectTimeout(t *testing.T) {
	for _, path := range requestPaths {
		t.Run(path.name, func(t *testing.T) {
			cases := []struct {
				name               string
				connect, backendMs uint32
				want               int
				min, max           time.Duration
			}{
				{"connect timeout first", 300, 10_000, http.StatusBadGateway, 250 * time.Millisecond, 3 * time.Second},
				{"route deadline first", 5_000, 300, http.StatusGatewayTimeout, 250 * time.Millisecond, 3 * time.Second},
			}
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					cl := l4Cluster("stuck", path.proto, stuckBackend(t))
					cl.ConnectTimeoutMs = tc.connect
					rt := route("r", "/", backend("stuck", 1))
					rt.Timeouts = &irv1.Timeouts{BackendRequestMs: tc.backendMs}
					l := httpListener(0, server("", vhost("", rt)))
					p := newL4Proxy(t, proxy.Limits{UpstreamDialTimeout: 30 * time.Second})
					apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
					c := newClient(addrOf(t, p, l.Name), nil)
					start := time.Now()
					r := must(t, c.do(path.req("http://x/")))
					if d := time.Since(start); r.status != tc.want || d < tc.min || d > tc.max {
						t.Fatalf("%d after %v, want %d after about %v", r.status, d, tc.want, tc.min)
					}
				})
			}
		})
	}
}

// A cluster's idle timeout closes its pooled connections after that long, for every path, while
// the proxy's default (90s) would keep them; a second cluster on the same endpoint without one
// has its own pool (its own connection), which the timeout does not touch.
func TestClusterIdleTimeout(t *testing.T) {
	for _, path := range requestPaths {
		t.Run(path.name, func(t *testing.T) {
			var opened, closed atomic.Int64
			var lastUse atomic.Int64 // unix nanos of the last request the backend finished
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				_, _ = io.WriteString(w, "ok")
				lastUse.Store(time.Now().UnixNano())
			}))
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				switch s {
				case http.StateNew:
					opened.Add(1)
				case http.StateClosed, http.StateHijacked:
					closed.Add(1)
				}
			}
			if path.proto == irv1.Cluster_H2C {
				srv.Config.Protocols = new(http.Protocols)
				srv.Config.Protocols.SetUnencryptedHTTP2(true)
			}
			srv.Start()
			t.Cleanup(srv.Close)
			be := &testBackend{name: "be", srv: srv, port: portOf(t, srv.Listener.Addr().String())}

			idle := cluster("idle", be)
			idle.Protocol, idle.IdleTimeoutMs = path.proto, 300
			kept := cluster("kept", be)
			kept.Protocol = path.proto
			l := httpListener(0, server("", vhost("",
				route("i", "/idle", backend("idle", 1)), route("k", "/kept", backend("kept", 1)))))
			p := newProxy(t)
			apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{idle, kept}))
			c := newClient(addrOf(t, p, l.Name), nil)
			if r := must(t, c.do(path.req("http://x/idle"))); r.status != http.StatusOK {
				t.Fatalf("/idle: %d", r.status)
			}
			if r := must(t, c.do(path.req("http://x/kept"))); r.status != http.StatusOK {
				t.Fatalf("/kept: %d", r.status)
			}
			eventually(t, "the idle cluster's connection closed", func() bool { return closed.Load() >= 1 })
			idleFor := time.Since(time.Unix(0, lastUse.Load()))
			if n, m := opened.Load(), closed.Load(); n != 2 || m != 1 {
				t.Fatalf("%d connections opened, %d closed; want one per cluster, the idle one's closed", n, m)
			}
			// The kept cluster's request came last: the closed connection had been idle longer.
			if idleFor < 250*time.Millisecond {
				t.Fatalf("a connection closed %v after the last request, before the 300ms idle timeout", idleFor)
			}
		})
	}
}

// A TCP route's connect is bounded by its cluster's connect timeout, not the proxy's default.
func TestTCPRouteClusterConnectTimeout(t *testing.T) {
	cl := l4Cluster("stuck", irv1.Cluster_TCP, stuckBackend(t))
	cl.ConnectTimeoutMs = 300
	l := portKeyed("TCP", 0, l4Route("route.tcp", "r", backend("stuck", 1)))
	p := newL4Proxy(t, proxy.Limits{UpstreamDialTimeout: 30 * time.Second})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
	c, err := net.Dial("tcp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	b, err := io.ReadAll(c)
	if err != nil && !isReset(err) {
		t.Fatalf("want the connection closed after the connect timeout, got %v", err)
	}
	if d := time.Since(start); len(b) > 0 || d < 250*time.Millisecond || d > 3*time.Second {
		t.Fatalf("read %q, closed after %v; want nothing, after about 300ms", b, d)
	}
}
