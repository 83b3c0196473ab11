package proxy_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
)

// TestHostSelection covers Server (Gateway listener hostname) and VirtualHost (listener ∩ route
// hostname) selection by the Host header, named after the Gateway API rule each case exercises.
func TestHostSelection(t *testing.T) {
	names := []string{"foo", "wild", "bar-only", "other", "catchall"}
	bs := map[string]*testBackend{}
	var clusters []*irv1.Cluster
	for _, n := range names {
		bs[n] = newBackend(t, n, nil)
		clusters = append(clusters, cluster(n, bs[n]))
	}
	l := httpListener(0,
		server("foo.example.com",
			vhost("foo.example.com", route("r/foo", "/foo", backend("foo", 1)))),
		server("*.example.com",
			vhost("bar.example.com", route("r/bar-only", "/only", backend("bar-only", 1))),
			vhost("*.example.com", route("r/wild", "/", backend("wild", 1)))),
		server("",
			vhost("other.org", route("r/other", "/", backend("other", 1))),
			vhost("", route("r/catchall", "/catchall", backend("catchall", 1)))),
	)
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, clusters))
	c := newClient(addrOf(t, p, l.Name), nil)

	cases := []struct {
		name, host, path string
		want             string // backend name, or "404"
	}{
		{"listener hostname exact match", "foo.example.com", "/foo", "foo"},
		{"listener wildcard matches one label", "baz.example.com", "/", "wild"},
		{"listener wildcard matches several labels", "a.b.example.com", "/x", "wild"},
		{"listener wildcard does not match its own suffix", "example.com", "/catchall", "catchall"},
		{"listener isolation: a more specific listener's hosts never reach other listeners' routes", "foo.example.com", "/catchall", "404"},
		{"route hostname narrower than listener hostname", "bar.example.com", "/only", "bar-only"},
		{"route hostname precedence falls through to the wildcard route's rules", "bar.example.com", "/else", "wild"},
		{"catch-all listener with an exact route hostname", "other.org", "/any", "other"},
		{"catch-all listener, catch-all route hostname", "unknown.net", "/catchall", "catchall"},
		{"no route matches on the catch-all listener", "unknown.net", "/nothing", "404"},
		{"Host port is ignored", "foo.example.com:8080", "/foo", "foo"},
		{"Host is case-insensitive", "FOO.Example.COM", "/foo", "foo"},
		{"Host trailing dot is ignored", "foo.example.com.", "/foo", "foo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := must(t, c.get(hostURL("http", "proxy", tc.path), "Host", tc.host))
			if tc.want == "404" {
				if r.status != http.StatusNotFound {
					t.Fatalf("status %d (backend %q), want 404", r.status, r.header.Get("X-Backend"))
				}
				return
			}
			if r.status != 200 || r.header.Get("X-Backend") != tc.want {
				t.Fatalf("status %d backend %q, want 200 from %q", r.status, r.header.Get("X-Backend"), tc.want)
			}
			if got := r.header.Get("X-Got-Host"); got != tc.host {
				t.Errorf("upstream saw Host %q, want the client's %q", got, tc.host)
			}
		})
	}
}

// TestErrorStatuses covers the statuses the engine answers itself.
func TestErrorStatuses(t *testing.T) {
	ok := newBackend(t, "ok", nil)
	release := make(chan struct{})
	defer close(release)
	slow := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	dead := &testBackend{name: "dead", port: closedPort(t)}
	timeouts := func(rt *irv1.Route, req, be uint32) *irv1.Route {
		rt.Timeouts = &irv1.Timeouts{RequestMs: req, BackendRequestMs: be}
		return rt
	}
	grpcLike := route("r/custom", "/custom", backend("empty", 1))
	grpcLike.Match = core.MustConfig("route.testerrors", map[string]string{"prefix": "/custom"})
	l := httpListener(0, server("", vhost("",
		route("r/no-backends", "/no-backends"),
		route("r/unresolved", "/unresolved", &irv1.Backend{Weight: 1, Error: "service default/missing not found"}),
		route("r/all-zero", "/all-zero", backend("ok", 0)),
		route("r/refused", "/refused", backend("dead", 1)),
		route("r/empty", "/empty", backend("empty", 1)),
		timeouts(route("r/backend-timeout", "/backend-timeout", backend("slow", 1)), 0, 50),
		timeouts(route("r/request-timeout", "/request-timeout", backend("slow", 1)), 50, 0),
		grpcLike,
		route("r/ok", "/ok", backend("ok", 1)),
	)))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l},
		[]*irv1.Cluster{cluster("dead", dead), cluster("empty"), cluster("ok", ok), cluster("slow", slow)}))
	c := newClient(addrOf(t, p, l.Name), nil)

	cases := []struct {
		name, path string
		want       int
	}{
		{"no route matched", "/nowhere", 404},
		{"rule without backends", "/no-backends", 500},
		{"unresolved backend reference", "/unresolved", 500},
		{"every backend weight 0", "/all-zero", 500},
		{"upstream connect refused", "/refused", 502},
		{"cluster without endpoints", "/empty", 503},
		{"backend request timeout", "/backend-timeout", 504},
		{"request timeout", "/request-timeout", 504},
		{"healthy route", "/ok", 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := must(t, c.get(hostURL("http", "example.com", tc.path)))
			if r.status != tc.want {
				t.Fatalf("status %d (%q), want %d", r.status, r.body, tc.want)
			}
		})
	}
	t.Run("matcher's own error format", func(t *testing.T) {
		r := must(t, c.get(hostURL("http", "example.com", "/custom")))
		if r.status != 503 || r.header.Get("X-Error-Status") != "503" || r.body != "custom error" {
			t.Fatalf("got %d %q %v, want the route.testerrors 503", r.status, r.body, r.header)
		}
	})
}

func TestFilters(t *testing.T) {
	a := newBackend(t, "a", nil)
	b := newBackend(t, "b", nil)
	setReq := core.MustConfig("filter.test.set_request_header", map[string]string{"name": "X-Test", "value": "rule"})
	setResp := core.MustConfig("filter.test.set_response_header", map[string]string{"name": "X-Resp", "value": "rule"})
	beResp := core.MustConfig("filter.test.set_response_header", map[string]string{"name": "X-Backend-Resp", "value": "b"})
	wrap := core.MustConfig("filter.test.wrap", map[string]string{"header": "X-Wrapped"})
	respond := core.MustConfig("filter.test.respond", map[string]int{"status": http.StatusTeapot})

	filtered := route("r/filtered", "/filtered", backend("a", 1))
	filtered.Filters = []*irv1.ModuleConfig{setReq, wrap, setResp}
	answered := route("r/answered", "/answered")
	answered.Filters = []*irv1.ModuleConfig{respond}
	perBackend := route("r/per-backend", "/per-backend", backend("b", 1, beResp))

	l := httpListener(0, server("", vhost("", filtered, answered, perBackend)))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("a", a), cluster("b", b)}))
	c := newClient(addrOf(t, p, l.Name), nil)

	t.Run("request, middleware and response filters in order", func(t *testing.T) {
		r := must(t, c.get(hostURL("http", "example.com", "/filtered")))
		if r.header.Get("X-Got-Test") != "rule" {
			t.Errorf("upstream did not see the request header: %v", r.header)
		}
		if r.header.Get("X-Wrapped") != "wrapped" || r.header.Get("X-Resp") != "rule" {
			t.Errorf("middleware or response filter missing: %v", r.header)
		}
		if r.header.Get("X-Seen-Status") != "200" {
			t.Errorf("response filter saw status %q", r.header.Get("X-Seen-Status"))
		}
	})
	t.Run("a filter that answers needs no backend", func(t *testing.T) {
		if r := must(t, c.get(hostURL("http", "example.com", "/answered"))); r.status != http.StatusTeapot {
			t.Fatalf("status %d, want 418", r.status)
		}
	})
	t.Run("backend filters apply to their backend", func(t *testing.T) {
		r := must(t, c.get(hostURL("http", "example.com", "/per-backend")))
		if r.header.Get("X-Backend-Resp") != "b" {
			t.Fatalf("backend response filter missing: %v", r.header)
		}
	})
}

// TestWeights checks the weighted choice among a rule's backends statistically, and that weight 0
// is never chosen.
func TestWeights(t *testing.T) {
	heavy, light, never := newBackend(t, "heavy", nil), newBackend(t, "light", nil), newBackend(t, "never", nil)
	l := httpListener(0, server("", vhost("",
		route("r/split", "/", backend("heavy", 80), backend("light", 20), backend("never", 0)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l},
		[]*irv1.Cluster{cluster("heavy", heavy), cluster("light", light), cluster("never", never)}))
	c := newClient(addrOf(t, p, l.Name), nil)

	const n = 1000
	got := map[string]int{}
	for range n {
		r := must(t, c.get(hostURL("http", "example.com", "/")))
		got[r.header.Get("X-Backend")]++
	}
	if got["never"] != 0 {
		t.Errorf("weight-0 backend chosen %d times", got["never"])
	}
	// 80/20 within ±5 percentage points.
	if h := got["heavy"]; h < 750 || h > 850 {
		t.Errorf("heavy got %d of %d, want about 800", h, n)
	}
	if got["heavy"]+got["light"] != n {
		t.Errorf("distribution %v does not add up to %d", got, n)
	}
}

func TestEndpointWeights(t *testing.T) {
	e1, e2 := newBackend(t, "e1", nil), newBackend(t, "e2", nil)
	cl := cluster("svc", e1, e2)
	cl.Endpoints[0].Weight = 3
	cl.Balancer = &irv1.ModuleConfig{Id: "lb.round_robin"}
	l := httpListener(0, server("", vhost("", route("r", "/", backend("svc", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
	c := newClient(addrOf(t, p, l.Name), nil)
	got := map[string]int{}
	for range 400 {
		got[must(t, c.get(hostURL("http", "example.com", "/"))).header.Get("X-Backend")]++
	}
	if got["e1"] != 300 || got["e2"] != 100 {
		t.Fatalf("endpoint picks %v, want e1:300 e2:100 (exact over whole cycles)", got)
	}
}

// TestActiveCounter: the engine counts a request against its endpoint while it is upstream.
func TestActiveCounter(t *testing.T) {
	var during atomic.Int64
	be := newBackend(t, "be", func(w http.ResponseWriter, _ *http.Request) {
		during.Store(testmod.LastPicked().Active.Load())
	})
	cl := cluster("be", be)
	cl.Balancer = &irv1.ModuleConfig{Id: "lb.test_probe"}
	l := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
	must(t, newClient(addrOf(t, p, l.Name), nil).get(hostURL("http", "example.com", "/")))
	if got := during.Load(); got != 1 {
		t.Fatalf("Active during the request = %d, want 1", got)
	}
	eventually(t, "Active back to 0", func() bool { return testmod.LastPicked().Active.Load() == 0 })
}
