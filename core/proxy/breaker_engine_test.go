package proxy_test

import (
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// newMetricsProxy is newProxy exporting its series on a registry of its own.
func newMetricsProxy(t *testing.T) (*proxy.Proxy, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: registry(), Metrics: reg})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p, reg
}

// metric is the value of the series name{labels} ("k=v" pairs), and whether it exists.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(labels)
	want := strings.Join(labels, ",")
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(got)
			if strings.Join(got, ",") == want {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue(), true
			}
		}
	}
	return 0, false
}

// flakyBackend answers 500 while failing is set, else 200, and counts the requests it sees.
type flakyBackend struct {
	*testBackend
	failing atomic.Bool
	seen    atomic.Int64
}

func newFlakyBackend(t *testing.T, name string) *flakyBackend {
	f := &flakyBackend{}
	f.testBackend = newBackend(t, name, func(w http.ResponseWriter, _ *http.Request) {
		f.seen.Add(1)
		if f.failing.Load() {
			http.Error(w, "failing", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, name)
	})
	return f
}

const breakerRoute = "HTTPRoute/ns/web"

func breakerSnapshot(t *testing.T, l *irv1.Listener, cb *irv1.CircuitBreaker, bs ...*testBackend) *irv1.Snapshot {
	t.Helper()
	web := cluster("web", bs...)
	web.CircuitBreaker = cb
	return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{web})
}

// An endpoint that starts failing trips its breaker after min_requests; then requests are
// answered 503 without reaching it; after open_ms one probe reaches it (still failing: open again,
// twice as long); when it has recovered the next probe closes the breaker. The metrics follow.
func TestCircuitBreakerEngine(t *testing.T) {
	be := newFlakyBackend(t, "be")
	be.failing.Store(true)
	l := httpListener(0, server("", vhost("", route(breakerRoute+"/rule/0/match/0", "/", backend("web", 1)))))
	p, reg := newMetricsProxy(t)
	cb := &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 60_000, OpenMs: 300, MinRequests: 5, MaxOpenMs: 10_000}
	apply(t, p, breakerSnapshot(t, l, cb, be.testBackend))
	c := newClient(addrOf(t, p, l.Name), nil)
	labels := []string{"route=" + breakerRoute, "upstream=" + be.srv.Listener.Addr().String()}
	value := func(name string, extra ...string) float64 {
		t.Helper()
		v, ok := metric(t, reg, name, append(extra, labels...)...)
		if !ok {
			t.Fatalf("no series %s%v", name, append(extra, labels...))
		}
		return v
	}
	if v := value("coxswain_proxy_circuit_breaker_state"); v != 0 {
		t.Fatalf("state %v before any request, want 0 (closed)", v)
	}

	for i := range 5 {
		if r := must(t, c.get("http://x/")); r.status != http.StatusInternalServerError {
			t.Fatalf("request %d: %d, want the backend's 500", i+1, r.status)
		}
	}
	tripped := time.Now()
	rejected := 0
	if r := must(t, c.get("http://x/")); r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "circuit breaker open") {
		t.Fatalf("after 5 failures of min 5: %d %q, want 503 circuit breaker open", r.status, r.body)
	}
	rejected++
	if n := be.seen.Load(); n != 5 {
		t.Fatalf("the backend saw %d requests, want 5: the open breaker let one through", n)
	}
	if v := value("coxswain_proxy_circuit_breaker_state"); v != 1 {
		t.Fatalf("state %v after the trip, want 1 (open)", v)
	}

	// awaitProbe sends requests until one is not rejected, and returns its status.
	awaitProbe := func() int {
		t.Helper()
		status := 0
		eventually(t, "the probe", func() bool {
			r := must(t, c.get("http://x/"))
			if r.status == http.StatusServiceUnavailable {
				rejected++
				return false
			}
			status = r.status
			return true
		})
		return status
	}
	if st := awaitProbe(); st != http.StatusInternalServerError || be.seen.Load() != 6 {
		t.Fatalf("probe: %d, backend saw %d; want the failing backend's 500, its 6th request", st, be.seen.Load())
	}
	if d := time.Since(tripped); d < 300*time.Millisecond {
		t.Fatalf("the probe went %v after the trip, before open_ms (300ms)", d)
	}
	reopened := time.Now()
	be.failing.Store(false)
	if st := awaitProbe(); st != http.StatusOK || be.seen.Load() != 7 {
		t.Fatalf("second probe: %d, backend saw %d; want 200, its 7th request", st, be.seen.Load())
	}
	if d := time.Since(reopened); d < 600*time.Millisecond {
		t.Fatalf("the second probe went %v after the failed one, before twice open_ms (600ms)", d)
	}
	for range 5 {
		if r := must(t, c.get("http://x/")); r.status != http.StatusOK {
			t.Fatalf("after the breaker closed: %d", r.status)
		}
	}

	for _, tc := range []struct {
		name  string
		extra []string
		want  float64
	}{
		{"coxswain_proxy_circuit_breaker_state", nil, 0},
		{"coxswain_proxy_circuit_breaker_transitions_total", []string{"to=open"}, 2},
		{"coxswain_proxy_circuit_breaker_transitions_total", []string{"to=half_open"}, 2},
		{"coxswain_proxy_circuit_breaker_transitions_total", []string{"to=closed"}, 1},
		{"coxswain_proxy_circuit_breaker_rejected_total", nil, float64(rejected)},
	} {
		if v := value(tc.name, tc.extra...); v != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.extra, v, tc.want)
		}
	}
}

// Of two endpoints, the failing one's breaker opens and every request goes to the healthy one
// (the engine picks again past an open breaker). The open breaker survives a table rebuild that
// does not change the policy and an in-place endpoint update; a changed policy starts afresh.
func TestCircuitBreakerPicksAround(t *testing.T) {
	good, bad := newFlakyBackend(t, "good"), newFlakyBackend(t, "bad")
	bad.failing.Store(true)
	third := newFlakyBackend(t, "third")
	rt := route(breakerRoute+"/rule/0/match/0", "/", backend("web", 1))
	l := httpListener(0, server("", vhost("", rt)))
	p, reg := newMetricsProxy(t)
	cb := &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 60_000, OpenMs: 60_000, MinRequests: 3}
	apply(t, p, breakerSnapshot(t, l, cb, good.testBackend, bad.testBackend))
	c := newClient(addrOf(t, p, l.Name), nil)
	for bad.seen.Load() < 3 {
		must(t, c.get("http://x/"))
	}
	// allGood checks that n requests all reach a healthy endpoint and none the failing one.
	allGood := func(what string, n int) {
		t.Helper()
		before := bad.seen.Load()
		for i := range n {
			if r := must(t, c.get("http://x/")); r.status != http.StatusOK {
				t.Fatalf("%s: request %d got %d %q, want 200 from a healthy endpoint", what, i, r.status, r.body)
			}
		}
		if n := bad.seen.Load() - before; n != 0 {
			t.Fatalf("%s: the failing endpoint saw %d requests past its open breaker", what, n)
		}
	}
	allGood("breaker open", 20)
	if v, _ := metric(t, reg, "coxswain_proxy_circuit_breaker_rejected_total",
		"route="+breakerRoute, "upstream="+bad.srv.Listener.Addr().String()); v < 10 {
		t.Errorf("rejected_total %v: want one per pick of the failing endpoint (about half of 20)", v)
	}

	// Another route in the snapshot: a new table, the same breakers.
	other := route("HTTPRoute/ns/other/rule/0/match/0", "/other", backend("web", 1))
	before := proxy.TableOf(p)
	l2 := httpListener(0, server("", vhost("", rt, other)))
	apply(t, p, breakerSnapshot(t, l2, cb, good.testBackend, bad.testBackend))
	if proxy.TableOf(p) == before {
		t.Fatal("the snapshot with another route was not rebuilt")
	}
	allGood("after a rebuild", 10)

	// Another endpoint: the same table, the same breakers.
	applyInPlace(t, p, breakerSnapshot(t, l2, cb, good.testBackend, bad.testBackend, third.testBackend))
	allGood("after an in-place endpoint update", 10)
	if third.seen.Load() == 0 {
		t.Error("the added endpoint got no traffic")
	}

	// The endpoint leaves: its breaker and series are forgotten.
	applyInPlace(t, p, breakerSnapshot(t, l2, cb, good.testBackend, third.testBackend))
	if _, ok := metric(t, reg, "coxswain_proxy_circuit_breaker_state",
		"route="+breakerRoute, "upstream="+bad.srv.Listener.Addr().String()); ok {
		t.Error("the state series of the endpoint that left is still exported")
	}

	// A changed policy is a fresh breaker: the failing endpoint, back, is tried again.
	cb2 := &irv1.CircuitBreaker{ThresholdPercent: 60, WindowMs: 60_000, OpenMs: 60_000, MinRequests: 3}
	apply(t, p, breakerSnapshot(t, l2, cb2, good.testBackend, bad.testBackend))
	seen := bad.seen.Load()
	for range 4 {
		must(t, c.get("http://x/"))
	}
	if bad.seen.Load() == seen {
		t.Error("under a new policy the failing endpoint got no request")
	}
}
