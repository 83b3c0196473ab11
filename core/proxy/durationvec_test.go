package proxy

import (
	"io"
	"iter"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coxswain-labs/coxswain/core"
)

// exposition is what /metrics serves for reg, as the admin server serves it.
func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, err := io.ReadAll(rec.Result().Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestDurationVecExpositionMatchesClientGolang: the proxy's own duration histogram is served
// exactly as a client_golang HistogramVec of the same name, help, buckets and labels that saw
// the same requests (durations that are exact in binary, so that both sums are the same float),
// including every boundary, values on a boundary (le is inclusive), past the last one, a label
// set that is removed, and one that is made again after it was removed.
func TestDurationVecExpositionMatchesClientGolang(t *testing.T) {
	const name, help = "coxswain_proxy_request_duration_seconds", "Help text."
	ours, theirs := prometheus.NewRegistry(), prometheus.NewRegistry()
	v, err := core.CollectorOf(core.NewMetrics(ours), name, help, []string{"gateway", "route"}, func() *durationVec {
		return newDurationVec(name, help)
	})
	if err != nil {
		t.Fatal(err)
	}
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: durationBuckets[:]}, []string{"gateway", "route"})
	theirs.MustRegister(h)

	observe := func(gateway, route string, seconds ...float64) {
		for _, s := range seconds {
			v.with(gateway, route).observe(time.Duration(s * float64(time.Second)))
			h.WithLabelValues(gateway, route).Observe(s)
		}
	}
	observe("ns/gw", "HTTPRoute/ns/a", 0.001953125, 0.0078125, 0.0078125, 0.03125, 0.5, 2, 16, 32, 0)
	observe("ns/gw", "HTTPRoute/ns/b", durationBuckets[:]...) // each on its boundary
	observe("", "", 0.25)
	observe("ns/gw", "HTTPRoute/ns/gone", 1)
	v.remove("ns/gw", "HTTPRoute/ns/gone")
	h.DeleteLabelValues("ns/gw", "HTTPRoute/ns/gone")
	observe("ns/gw", "HTTPRoute/ns/again", 4)
	v.remove("ns/gw", "HTTPRoute/ns/again")
	h.DeleteLabelValues("ns/gw", "HTTPRoute/ns/again")
	observe("ns/gw", "HTTPRoute/ns/again", 0.5)

	// The boundaries are not exact in binary: client_golang's float sum of them rounds
	// (19.439999999999998), the integer nanoseconds do not; the rest is compared as served.
	const sumB = `coxswain_proxy_request_duration_seconds_sum{gateway="ns/gw",route="HTTPRoute/ns/b"} `
	got, want := exposition(t, ours), exposition(t, theirs)
	if !strings.Contains(got, sumB+"19.44\n") || !strings.Contains(want, sumB+"19.439999999999998\n") {
		t.Fatalf("the sums of the boundaries are not the expected floats:\n%s\n%s", got, want)
	}
	want = strings.Replace(want, sumB+"19.439999999999998\n", sumB+"19.44\n", 1)
	if got != want {
		t.Fatalf("exposition differs from client_golang's HistogramVec\nours:\n%s\nclient_golang:\n%s", got, want)
	}
	if !strings.Contains(got, `coxswain_proxy_request_duration_seconds_bucket{gateway="ns/gw",route="HTTPRoute/ns/a",le="0.01"} 4`) {
		t.Fatalf("the exposition lacks a bucket it must have:\n%s", got)
	}
}

// TestDurationVecCountsExactlyUnderConcurrency: requests observed from many goroutines at once,
// while /metrics is scraped, sum exactly in the count, the buckets and the sum (run with -race).
func TestDurationVecCountsExactlyUnderConcurrency(t *testing.T) {
	f := newSeriesFixture(t)
	var held obsHeld
	o := f.s.routeObsOf(&held, "ns/gw", "HTTPRoute/ns/r", nil)
	const workers, each = 8, 2000
	durations := []time.Duration{time.Millisecond, 30 * time.Millisecond, 20 * time.Second}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				o.observeDuration(durations[(w+i)%len(durations)])
			}
		})
	}
	wg.Go(func() { // scrapes racing the observations
		for range 20 {
			f.exported(t)
		}
	})
	wg.Wait()
	if n := testutil.CollectAndCount(f.s.duration); n != 1 {
		t.Fatalf("%d duration series, want 1", n)
	}
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, mf := range families {
		if mf.GetName() != "coxswain_proxy_request_duration_seconds" {
			continue
		}
		found = true
		checkHistogram(t, mf.GetMetric()[0].GetHistogram().GetSampleCount(), mf.GetMetric()[0].GetHistogram().GetSampleSum(),
			func(yield func(float64, uint64) bool) {
				for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
					if !yield(b.GetUpperBound(), b.GetCumulativeCount()) {
						return
					}
				}
			}, workers, each, durations)
	}
	if !found {
		t.Fatal("no duration histogram gathered")
	}
}

// checkHistogram compares a gathered histogram with what workers × each observations of
// durations, taken in turn, make.
func checkHistogram(t *testing.T, count uint64, sum float64, buckets iter.Seq2[float64, uint64], workers, each int,
	durations []time.Duration) {
	t.Helper()
	if count != uint64(workers*each) {
		t.Fatalf("count %d, want %d", count, workers*each)
	}
	var wantSum time.Duration
	perDuration := map[time.Duration]uint64{}
	for w := range workers {
		for i := range each {
			d := durations[(w+i)%len(durations)]
			wantSum += d
			perDuration[d]++
		}
	}
	if sum != wantSum.Seconds() {
		t.Fatalf("sum %v s, want %v s", sum, wantSum.Seconds())
	}
	n := 0
	for le, got := range buckets {
		n++
		var want uint64
		for d, k := range perDuration {
			if d.Seconds() <= le {
				want += k
			}
		}
		if got != want {
			t.Errorf("bucket le=%v: %d, want %d", le, got, want)
		}
	}
	if n != len(durationBuckets) {
		t.Errorf("%d buckets, want %d", n, len(durationBuckets))
	}
}
