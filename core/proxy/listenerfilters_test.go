package proxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// TestListenerFilters runs a Server's listener filters (Gateway listeners[].filters.requests)
// through a real proxy: in list order, before the route lookup (which sees what they changed),
// on unrouted requests too, ending a request they answer before routing, and never changing the
// Host the listener and the virtual host were chosen by.
func TestListenerFilters(t *testing.T) {
	a := newBackend(t, "a", nil)
	b := newBackend(t, "b", nil)
	set := func(v string) *irv1.ModuleConfig {
		return core.MustConfig("filter.test.set_request_header", map[string]string{"name": "X-Test", "value": v})
	}
	wrap := core.MustConfig("filter.test.wrap", map[string]string{"header": "X-Listener"})
	toB := core.MustConfig("filter.test.mutate", map[string]string{"path": "/b/rewritten", "host": "other.example"})
	deny := core.MustConfig("filter.test.respond", map[string]int{"status": http.StatusForbidden})

	ordered := server("ordered.example", vhost("ordered.example", route("r/a", "/", backend("a", 1))))
	ordered.Filters = []*irv1.ModuleConfig{wrap, set("first"), set("second")}
	routed := server("routed.example", vhost("routed.example",
		route("r/b", "/b", backend("b", 1)), route("r/a2", "/", backend("a", 1))))
	routed.Filters = []*irv1.ModuleConfig{toB}
	denied := server("denied.example", vhost("denied.example", route("r/a3", "/", backend("a", 1))))
	denied.Filters = []*irv1.ModuleConfig{deny, set("never")}
	other := server("other.example", vhost("other.example", route("r/other", "/", backend("a", 1))))
	plain := server("", vhost("", route("r/plain", "/only", backend("a", 1))))

	l := httpListener(0, ordered, routed, denied, other, plain)
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("a", a), cluster("b", b)}))
	c := newClient(addrOf(t, p, l.Name), nil)

	t.Run("in list order, the last writer wins", func(t *testing.T) {
		r := must(t, c.get(hostURL("http", "ordered.example", "/"), "X-Test", "client"))
		if r.status != http.StatusOK || r.header.Get("X-Got-Test") != "second" || r.header.Get("X-Listener") != "wrapped" {
			t.Fatalf("status %d, upstream saw X-Test=%q, X-Listener=%q", r.status, r.header.Get("X-Got-Test"), r.header.Get("X-Listener"))
		}
	})
	t.Run("a request no route matches passes them too", func(t *testing.T) {
		// No route of ordered.example's only vhost misses "/", so ask the catch-all-less host
		// of the plain server for a path none of its routes has: no listener filters there.
		r := must(t, c.get(hostURL("http", "plain.example", "/nothing")))
		if r.status != http.StatusNotFound || r.header.Get("X-Listener") != "" {
			t.Fatalf("plain server: status %d, X-Listener %q", r.status, r.header.Get("X-Listener"))
		}
		unrouted := server("unrouted.example", vhost("unrouted.example", route("r/x", "/x", backend("a", 1))))
		unrouted.Filters = []*irv1.ModuleConfig{wrap}
		l2 := httpListener(0, unrouted)
		p2 := newProxy(t)
		apply(t, p2, snapshot(t, []*irv1.Listener{l2}, []*irv1.Cluster{cluster("a", a)}))
		r = must(t, newClient(addrOf(t, p2, l2.Name), nil).get(hostURL("http", "unrouted.example", "/elsewhere")))
		if r.status != http.StatusNotFound || r.header.Get("X-Listener") != "wrapped" {
			t.Fatalf("status %d, X-Listener %q; want 404 after the listener filter ran", r.status, r.header.Get("X-Listener"))
		}
	})
	t.Run("routing sees their changes, the Host stays", func(t *testing.T) {
		r := must(t, c.get(hostURL("http", "routed.example", "/a/original")))
		if r.header.Get("X-Backend") != "b" || r.header.Get("X-Got-Path") != "/b/rewritten" {
			t.Fatalf("backend %q path %q, want b /b/rewritten", r.header.Get("X-Backend"), r.header.Get("X-Got-Path"))
		}
		if got := r.header.Get("X-Got-Host"); !strings.HasPrefix(got, "routed.example") {
			t.Fatalf("upstream Host %q: a listener filter changed it", got)
		}
	})
	t.Run("an answering filter ends the request before routing", func(t *testing.T) {
		r := must(t, c.get(hostURL("http", "denied.example", "/")))
		if r.status != http.StatusForbidden || r.header.Get("X-Backend") != "" {
			t.Fatalf("status %d backend %q, want 403 from the filter", r.status, r.header.Get("X-Backend"))
		}
	})
}

// TestListenerFilterResponseOnly: a response filter cannot be a listener filter; the snapshot is
// refused, and says why.
func TestListenerFilterResponseOnly(t *testing.T) {
	s := server("", vhost("", route("r", "/", backend("a", 1))))
	s.Filters = []*irv1.ModuleConfig{core.MustConfig("filter.test.set_response_header", map[string]string{"name": "X", "value": "y"})}
	a := newBackend(t, "a", nil)
	p := newProxy(t)
	err := p.Apply(t.Context(), snapshot(t, []*irv1.Listener{httpListener(0, s)}, []*irv1.Cluster{cluster("a", a)}))
	if err == nil || !strings.Contains(err.Error(), "only filters responses") {
		t.Fatalf("Apply: %v, want a refusal of the response-only listener filter", err)
	}
}
