package proxy

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coxswain-labs/coxswain/core"
)

// seriesFixture is a requestSeries on a registry of its own, and the route objects' clusters.
type seriesFixture struct {
	reg *prometheus.Registry
	s   *requestSeries
}

func newSeriesFixture(t testing.TB) seriesFixture {
	reg := prometheus.NewRegistry()
	s, err := newRequestSeries(core.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	return seriesFixture{reg: reg, s: s}
}

// exported is how many series the registry exports.
func (f seriesFixture) exported(t testing.TB) int {
	n, err := testutil.GatherAndCount(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRouteSeriesLifecycle: a label set exports nothing until a request needs one of its
// series, two holders of the same route object share the children (the count goes on), and the
// series are deleted when the last holder releases them, not before.
func TestRouteSeriesLifecycle(t *testing.T) {
	f := newSeriesFixture(t)
	be := &cluster{name: "ns/svc:80"}
	var first, second obsHeld
	a := f.s.routeObsOf(&first, "ns/gw", "httproute/ns/r", []*cluster{be, nil, be})
	b := f.s.routeObsOf(&second, "ns/gw", "httproute/ns/r", []*cluster{be})
	if n := f.exported(t); n != 0 {
		t.Fatalf("%d series exported before any request, want 0", n)
	}
	// The duplicate and the unresolved backend are left out: one backend and backend "".
	if a.backend(be) == a.backend(nil) || a.backend(be) != b.backend(be) || a.backend(nil) != b.backend(nil) {
		t.Fatal("the two holders do not share the label sets of the same route object")
	}
	a.backend(be).count(f.s, class2xx)
	b.backend(be).count(f.s, class2xx)
	a.backend(be).count(f.s, class5xx)
	a.backend(&cluster{name: "other"}).count(f.s, class4xx) // not a backend of the route: ""
	a.backend(be).upstreamError(f.s, errReset)
	a.observeDuration(20 * time.Millisecond)
	for _, c := range []struct {
		backend, class string
		want           float64
	}{{"ns/svc:80", "2xx", 2}, {"ns/svc:80", "5xx", 1}, {"", "4xx", 1}} {
		got := testutil.ToFloat64(f.s.requests.WithLabelValues("ns/gw", "httproute/ns/r", c.backend, c.class))
		if got != c.want {
			t.Errorf("requests{backend=%q, code_class=%s} = %v, want %v", c.backend, c.class, got, c.want)
		}
	}
	if got := testutil.ToFloat64(f.s.upstreamErrors.WithLabelValues("ns/gw", "httproute/ns/r", "ns/svc:80", "reset")); got != 1 {
		t.Errorf("upstream errors = %v, want 1", got)
	}
	// 3 request series, 1 upstream error series, 1 histogram.
	if n := f.exported(t); n != 5 {
		t.Fatalf("%d series exported, want 5", n)
	}
	f.s.release(&first)
	if n := f.exported(t); n != 5 {
		t.Fatalf("%d series exported after the first holder let go, want 5 (the second holds them)", n)
	}
	f.s.release(&second)
	if n := f.exported(t); n != 0 {
		t.Fatalf("%d series exported after the last holder let go, want 0", n)
	}
	if len(f.s.routes) != 0 || len(f.s.backends) != 0 {
		t.Fatalf("%d route and %d backend label sets left after release", len(f.s.routes), len(f.s.backends))
	}
	// Stragglers of released tables, one whose histogram was made and one whose was not, make
	// no series that no table would delete.
	var third obsHeld
	c := f.s.routeObsOf(&third, "ns/gw", "httproute/ns/r", []*cluster{be})
	f.s.release(&third)
	a.observeDuration(time.Millisecond)
	c.observeDuration(time.Millisecond)
	if n := f.exported(t); n != 0 {
		t.Fatalf("%d series exported after stragglers of released tables, want 0", n)
	}
}

// TestRouteSeriesConcurrentFirstUse: requests racing to make the same children count into one
// series each (run with -race).
func TestRouteSeriesConcurrentFirstUse(t *testing.T) {
	f := newSeriesFixture(t)
	be := &cluster{name: "ns/svc:80"}
	var held obsHeld
	o := f.s.routeObsOf(&held, "ns/gw", "httproute/ns/r", []*cluster{be})
	const workers, each = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				o.backend(be).count(f.s, codeClass((w+i)%int(numClasses)))
				o.backend(nil).upstreamError(f.s, upstreamError((w+i)%int(numUpstreamErrors)))
			}
		})
	}
	wg.Wait()
	total := 0.0
	for _, class := range classLabels {
		total += testutil.ToFloat64(f.s.requests.WithLabelValues("ns/gw", "httproute/ns/r", "ns/svc:80", class))
	}
	errs := 0.0
	for _, reason := range upstreamErrorLabels {
		errs += testutil.ToFloat64(f.s.upstreamErrors.WithLabelValues("ns/gw", "httproute/ns/r", "", reason))
	}
	if total != workers*each || errs != workers*each {
		t.Fatalf("counted %v requests and %v upstream errors, want %d each", total, errs, workers*each)
	}
}

// BenchmarkRouteSeriesHeap measures the heap the request series' label sets of n route objects
// keep (each with one backend, as BenchmarkPropagation's routes), after a GC, before any
// request: what a table of n routes holds for its metrics.
func BenchmarkRouteSeriesHeap(b *testing.B) {
	const n = 20000
	clusters := []*cluster{{name: "bench/svc:80"}}
	names := make([]string, n)
	for i := range names {
		names[i] = routeObject(fmt.Sprintf("httproute/bench/pre-%d/rule/0", i))
	}
	var live uint64
	for b.Loop() {
		f := newSeriesFixture(b)
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		held := make([]obsHeld, n)
		obs := make([]*routeObs, n)
		for i := range obs {
			obs[i] = f.s.routeObsOf(&held[i], "bench/gw", names[i], clusters)
		}
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		live = max(live, ms1.HeapAlloc-ms0.HeapAlloc)
		runtime.KeepAlive(obs)
		runtime.KeepAlive(held)
	}
	b.ReportMetric(float64(live)/n, "live-B/route")
}
