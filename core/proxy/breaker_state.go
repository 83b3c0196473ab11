package proxy

import (
	"strconv"
	"sync/atomic"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// The circuit breaker of one endpoint, per route (ir.proto's CircuitBreaker is the contract):
//
//	closed ──(errors ≥ threshold of ≥ minRequests in the window)──► open
//	open ──(open duration over; the next request is the probe)──► half open
//	half open ──(probe ok)──► closed, the window and the open duration reset
//	half open ──(probe failed)──► open for twice the last duration, at most maxOpen
//
// admit and done are lock-free and allocate nothing but a phase per transition.

type breakerState uint8

const (
	stateClosed breakerState = iota
	stateOpen
	stateHalfOpen
)

// label is the state's name in coxswain_proxy_circuit_breaker_transitions_total's "to".
func (s breakerState) label() string {
	switch s {
	case stateOpen:
		return "open"
	case stateHalfOpen:
		return "half_open"
	}
	return "closed"
}

// The engine's defaults for the CircuitBreaker fields a snapshot leaves at zero: the policy's
// documented defaults (window 10s, openDuration 5s, minRequests 10), so a snapshot written by hand
// means what a CoxswainBackendPolicy would. The controller fills every field itself; it never
// sends a threshold of 0 (that is a policy without a breaker), for which 50% is a middle ground.
const (
	defaultThresholdPercent = 50
	defaultWindow           = 10 * time.Second
	defaultOpen             = 5 * time.Second
	defaultMinRequests      = 10
)

// breakerConfig is an IR CircuitBreaker with the defaults filled in, durations in nanoseconds.
type breakerConfig struct {
	threshold uint64 // percent, 1 to 100
	window    int64
	open      int64 // the first open duration
	maxOpen   int64 // at least open; equal to it for a constant open duration
	minReqs   uint64
}

func breakerConfigOf(cb *irv1.CircuitBreaker) breakerConfig {
	ms := func(v uint32, def time.Duration) int64 {
		if v == 0 {
			return int64(def)
		}
		return int64(time.Duration(v) * time.Millisecond)
	}
	c := breakerConfig{
		threshold: min(uint64(cb.GetThresholdPercent()), 100),
		window:    ms(cb.GetWindowMs(), defaultWindow),
		open:      ms(cb.GetOpenMs(), defaultOpen),
		minReqs:   uint64(cb.GetMinRequests()),
	}
	if c.threshold == 0 {
		c.threshold = defaultThresholdPercent
	}
	if c.minReqs == 0 {
		c.minReqs = defaultMinRequests
	}
	c.maxOpen = max(ms(cb.GetMaxOpenMs(), 0), c.open) // 0, or less than open: constant
	return c
}

// key identifies the configuration in a shared-state key: a changed policy is a fresh breaker.
func (c breakerConfig) key() string {
	b := strconv.AppendUint(nil, c.threshold, 10)
	for _, v := range []int64{c.window, c.open, c.maxOpen, int64(c.minReqs)} {
		b = append(b, '/')
		b = strconv.AppendInt(b, v, 10)
	}
	return string(b)
}

// phase is a breaker's state with what belongs to it, replaced whole, so that a state and its
// deadline change together in one atomic step. Every transition makes a new one, closed included:
// a compare-and-swap from a phase then cannot succeed on a later phase that looks the same (a
// request that saw the breaker closed before it opened cannot trip it once it has closed again).
type phase struct {
	state   breakerState
	until   int64 // open: when the probe may go (clock time)
	openFor int64 // open and half open: how long this open lasts or lasted
}

// epBreaker is the breaker of one endpoint (by address) for one (route, cluster).
type epBreaker struct {
	cfg   *breakerConfig
	clock func() int64 // nanoseconds, monotonic
	phase atomic.Pointer[phase]
	win   window
	// normal and probe are what admit hands out: done on probe settles the half-open state,
	// done on normal counts in the window. Two fixed handles tell them apart without allocating.
	normal, probe breaker
	series        breakerHandles
	addr          string // the endpoint's host:port, for its series
}

func newEpBreaker(cfg *breakerConfig, clock func() int64, addr string, series breakerHandles) *epBreaker {
	e := &epBreaker{cfg: cfg, clock: clock, addr: addr, series: series}
	e.win.width = max(cfg.window/windowBuckets, 1)
	e.phase.Store(&phase{state: stateClosed})
	e.normal = breaker{e: e}
	e.probe = breaker{e: e, probe: true}
	return e
}

// breaker is an admitted request's handle on its endpoint's breaker.
type breaker struct {
	e     *epBreaker
	probe bool
}

// done records how an admitted request ended. A nil breaker does nothing.
func (b *breaker) done(o outcome) {
	if b == nil {
		return
	}
	if b.probe {
		b.e.settle(o.failed())
		return
	}
	b.e.record(o.failed())
}

// admit lets a request through when closed, or as the probe once the open duration is over; it
// rejects the others.
func (e *epBreaker) admit() (*breaker, bool) {
	for {
		ph := e.phase.Load()
		if ph.state == stateClosed {
			return &e.normal, true
		}
		if ph.state == stateOpen && e.clock() >= ph.until {
			if !e.phase.CompareAndSwap(ph, &phase{state: stateHalfOpen, openFor: ph.openFor}) {
				continue // another request became the probe, or settled it meanwhile
			}
			e.moved(stateHalfOpen)
			return &e.probe, true
		}
		e.series.rejected.Inc()
		return nil, false
	}
}

// record counts a request admitted while closed and trips when the window says so. A request
// that ends after the breaker opened (it was admitted before) is not counted: the probe decides.
func (e *epBreaker) record(failed bool) {
	ph := e.phase.Load()
	if ph.state != stateClosed {
		return
	}
	now := e.clock()
	reqs, errs := e.win.add(now, failed)
	if reqs >= e.cfg.minReqs && errs*100 >= e.cfg.threshold*reqs {
		e.open(ph, now, e.cfg.open)
	}
}

// settle ends the half-open state with the probe's outcome.
func (e *epBreaker) settle(failed bool) {
	ph := e.phase.Load()
	if ph.state != stateHalfOpen {
		return
	}
	if failed {
		e.open(ph, e.clock(), min(2*ph.openFor, e.cfg.maxOpen))
		return
	}
	e.win.reset() // before closing: what is counted from now on starts afresh
	if e.phase.CompareAndSwap(ph, &phase{state: stateClosed}) {
		e.moved(stateClosed)
	}
}

// open moves from the phase from to open for d; of racing callers, one does.
func (e *epBreaker) open(from *phase, now, d int64) {
	if e.phase.CompareAndSwap(from, &phase{state: stateOpen, until: now + d, openFor: d}) {
		e.moved(stateOpen)
	}
}

// moved exports a transition.
func (e *epBreaker) moved(to breakerState) {
	e.series.state.Set(float64(to))
	e.series.to[to].Inc()
}

// state is the current state (tests, metrics).
func (e *epBreaker) state() breakerState { return e.phase.Load().state }

// windowBuckets is how many buckets a window has: it covers the current bucket and the
// windowBuckets-1 before it, between 90% and all of the configured window.
const windowBuckets = 10

// window counts requests and errors over a sliding window of windowBuckets time buckets. Each
// bucket is one word holding the epoch it counts (as a tag) and its two counts, updated by
// compare-and-swap: a bucket reused for a newer epoch is reset and counted into in one step, so no
// count is lost to a race and nothing locks.
type window struct {
	width int64 // of a bucket, in nanoseconds
	b     [windowBuckets]atomic.Uint64
}

const (
	countBits = 20 // per count: a bucket holds up to ≈1M requests, then stops counting
	countMax  = 1<<countBits - 1
	tagShift  = 2 * countBits
	tagSpan   = 1<<(64-tagShift) - 1 // tags are 1…tagSpan; 0 is an empty bucket
)

// tagOf is epoch's tag. Two epochs tagSpan (16M) buckets apart share a tag, but a bucket is
// reused every windowBuckets epochs, so a stale bucket is taken for a current one only if it went
// untouched for a multiple of 16M buckets (≈19 days at a 1s window).
func tagOf(epoch int64) uint64 { return uint64(epoch)%tagSpan + 1 }

func counts(v uint64, tag uint64) (reqs, errs uint64) {
	if v>>tagShift != tag {
		return 0, 0
	}
	return v >> countBits & countMax, v & countMax
}

// add counts one request at clock time now and returns the window's totals.
func (w *window) add(now int64, failed bool) (reqs, errs uint64) {
	epoch := now / w.width
	tag := tagOf(epoch)
	slot := &w.b[epoch%windowBuckets]
	for {
		old := slot.Load()
		r, e := counts(old, tag)
		if r == countMax {
			break // full: the sample so far stands for the bucket, its ratio kept
		}
		r++
		if failed {
			e++
		}
		if slot.CompareAndSwap(old, tag<<tagShift|r<<countBits|e) {
			break
		}
	}
	return w.sum(epoch)
}

// sum totals the buckets of epoch and the windowBuckets-1 before it.
func (w *window) sum(epoch int64) (reqs, errs uint64) {
	for k := int64(0); k < windowBuckets && k <= epoch; k++ {
		r, e := counts(w.b[(epoch-k)%windowBuckets].Load(), tagOf(epoch-k))
		reqs += r
		errs += e
	}
	return reqs, errs
}

func (w *window) reset() {
	for i := range w.b {
		w.b[i].Store(0)
	}
}

// clockBase anchors monotonic: breaker times are nanoseconds since the process started.
var clockBase = time.Now()

func monotonic() int64 { return int64(time.Since(clockBase)) }
