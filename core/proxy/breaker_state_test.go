package proxy

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// fakeClock is the breakers' clock in these tests: time moves only when the test says so.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() int64              { return c.ns.Load() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) set(d time.Duration)     { c.ns.Store(int64(d)) }
func (c *fakeClock) since0() time.Duration   { return time.Duration(c.ns.Load()) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func testSeries(t *testing.T, m *core.Metrics) *breakerSeries {
	t.Helper()
	s, err := newBreakerSeries(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newTestBreaker(t *testing.T, cb *irv1.CircuitBreaker) (*epBreaker, *fakeClock) {
	t.Helper()
	clock := &fakeClock{}
	clock.set(time.Hour) // away from zero, as a real clock is
	cfg := breakerConfigOf(cb)
	return newEpBreaker(&cfg, clock.now, "10.0.0.1:80", testSeries(t, nil).acquire("r", "10.0.0.1:80")), clock
}

// request runs one request through e: admitted or not, and if so ending as failed says.
func request(e *epBreaker, failed bool) (admitted bool) {
	b, ok := e.admit()
	if !ok {
		return false
	}
	o := outcomeOK
	if failed {
		o = outcome5xx
	}
	b.done(o)
	return true
}

func TestBreakerTripsAfterMinRequests(t *testing.T) {
	e, _ := newTestBreaker(t, &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 10_000, OpenMs: 1000, MinRequests: 5})
	for i := range 4 {
		if !request(e, true) {
			t.Fatalf("request %d rejected before min_requests were seen", i+1)
		}
	}
	if e.state() != stateClosed {
		t.Fatalf("state %v after 4 failures of min 5, want closed", e.state())
	}
	if !request(e, true) {
		t.Fatal("the 5th request rejected")
	}
	if e.state() != stateOpen {
		t.Fatalf("state %v after 5 failures of min 5, want open", e.state())
	}
	if request(e, false) {
		t.Fatal("open breaker admitted a request")
	}
}

func TestBreakerThresholdBoundary(t *testing.T) {
	cases := []struct {
		name       string
		threshold  uint32
		oks, fails int // in that order; min_requests is their sum
		wantOpen   bool
	}{
		{"below", 50, 6, 4, false},
		{"at", 50, 5, 5, true},
		{"above", 50, 4, 6, true},
		{"100 percent, one success", 100, 1, 9, false},
		{"100 percent, all failed", 100, 0, 10, true},
		{"1 percent, one failure", 1, 99, 1, true},
		{"over 100 is 100", 150, 1, 9, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestBreaker(t, &irv1.CircuitBreaker{ThresholdPercent: tc.threshold, WindowMs: 10_000,
				OpenMs: 1000, MinRequests: uint32(tc.oks + tc.fails)})
			for range tc.oks {
				request(e, false)
			}
			for range tc.fails {
				request(e, true)
			}
			if got := e.state() == stateOpen; got != tc.wantOpen {
				t.Fatalf("%d ok then %d failed at %d%%: open %v, want %v", tc.oks, tc.fails, tc.threshold, got, tc.wantOpen)
			}
		})
	}
}

// trip opens e with min_requests failures.
func trip(t *testing.T, e *epBreaker) {
	t.Helper()
	for e.state() == stateClosed {
		if !request(e, true) {
			t.Fatal("rejected while closed")
		}
	}
}

// Once the open duration is over, of many requests arriving at once exactly one is admitted, as
// the probe; the others are rejected while it is in flight; its success closes the breaker.
func TestBreakerHalfOpenSingleProbe(t *testing.T) {
	e, clock := newTestBreaker(t, &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 10_000, OpenMs: 1000, MinRequests: 2})
	trip(t, e)
	clock.advance(ms(999))
	if _, ok := e.admit(); ok {
		t.Fatal("admitted before the open duration was over")
	}
	clock.advance(ms(1))
	var admitted atomic.Int64
	var probe atomic.Pointer[breaker]
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if b, ok := e.admit(); ok {
				admitted.Add(1)
				probe.Store(b)
			}
		}()
	}
	close(start)
	wg.Wait()
	if n := admitted.Load(); n != 1 || e.state() != stateHalfOpen {
		t.Fatalf("%d of 32 concurrent requests admitted, state %v; want exactly 1 probe, half open", n, e.state())
	}
	clock.advance(time.Hour)
	if _, ok := e.admit(); ok {
		t.Fatal("a second request admitted while the probe is in flight")
	}
	probe.Load().done(outcomeOK)
	if e.state() != stateClosed || !request(e, false) {
		t.Fatalf("after the probe succeeded: state %v, want closed and admitting", e.state())
	}
}

// A failed probe opens the breaker again for twice as long as the last time, up to max_open_ms;
// closing resets the duration; without max_open_ms it stays open_ms.
func TestBreakerBackoff(t *testing.T) {
	e, clock := newTestBreaker(t, &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 10_000, OpenMs: 100,
		MinRequests: 1, MaxOpenMs: 350})
	// openFor checks that e stays open for exactly d, then lets the probe through.
	openFor := func(d time.Duration) *breaker {
		t.Helper()
		clock.advance(d - 1)
		if _, ok := e.admit(); ok {
			t.Fatalf("admitted %v into an open period of %v", d-1, d)
		}
		clock.advance(1)
		b, ok := e.admit()
		if !ok || !b.probe {
			t.Fatalf("no probe after an open period of %v", d)
		}
		return b
	}
	trip(t, e)
	openFor(ms(100)).done(outcomeFailed)
	openFor(ms(200)).done(outcomeFailed)
	openFor(ms(350)).done(outcomeFailed) // 400, capped
	openFor(ms(350)).done(outcomeOK)
	if e.state() != stateClosed {
		t.Fatalf("state %v after a good probe", e.state())
	}
	trip(t, e)
	openFor(ms(100)) // back to open_ms

	e, clock = newTestBreaker(t, &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 10_000, OpenMs: 100, MinRequests: 1})
	trip(t, e)
	openFor(ms(100)).done(outcome5xx)
	openFor(ms(100)).done(outcome5xx) // no max_open_ms: constant
}

// Errors older than the window are forgotten: the window slides by buckets of a tenth of it.
func TestBreakerWindowSlides(t *testing.T) {
	e, clock := newTestBreaker(t, &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 1000, OpenMs: 1000, MinRequests: 5})
	base := clock.since0()
	for range 4 {
		request(e, true)
	}
	clock.set(base + ms(1000)) // the first bucket has left the window
	request(e, true)
	if e.state() != stateClosed {
		t.Fatal("tripped on errors older than the window")
	}
	clock.set(base + ms(1500))
	for range 3 {
		request(e, true)
	}
	if e.state() != stateClosed {
		t.Fatal("tripped with 4 errors in the window, min 5")
	}
	request(e, true) // 5 in the window (at 1000ms and 1500ms)
	if e.state() != stateOpen {
		t.Fatalf("state %v with 5 errors of 5 in the window, want open", e.state())
	}
}

// Requests admitted before the breaker opened that end while it is open are not counted, and a
// closed breaker starts with an empty window.
func TestBreakerCloseResetsWindow(t *testing.T) {
	e, clock := newTestBreaker(t, &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 60_000, OpenMs: 100, MinRequests: 3})
	late, _ := e.admit() // admitted while closed, ends after the trip
	trip(t, e)
	late.done(outcomeFailed)
	clock.advance(ms(100))
	probe, _ := e.admit()
	probe.done(outcomeOK)
	for range 2 {
		request(e, true)
	}
	if e.state() != stateClosed {
		t.Fatal("the errors from before closing counted again")
	}
	request(e, true)
	if e.state() != stateOpen {
		t.Fatal("3 fresh errors of min 3 did not trip")
	}
}

// The window's counts are exact under concurrency, including across a bucket's reuse.
func TestWindowConcurrentCounts(t *testing.T) {
	var w window
	w.width = int64(ms(100))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				w.add(int64(ms(1000)), (g+i)%4 == 0) // epoch 10: the bucket epoch 0 used
			}
		}()
	}
	wg.Wait()
	if r, e := w.sum(10); r != 8000 || e != 2000 {
		t.Fatalf("window has %d requests, %d errors; want 8000, 2000", r, e)
	}
	if r, _ := w.sum(20); r != 0 {
		t.Fatalf("a window later %d requests remain", r)
	}
}
