// Package ewma is the "lb.ewma" balancer: each pick goes to the endpoint with the lowest expected
// cost, its exponentially weighted moving average of response time (α = 1/8) times its requests in
// flight plus one, divided by its weight. An endpoint without a sample yet is probed first: an
// idle unsampled endpoint is picked before any sampled one.
//
// Samples come from the engine through core.BalancerFeedback at the end of each exchange. A
// failed exchange (see core.BalancerFeedback) only ever raises an average and never makes the
// first sample: a request cut short by a client that went away says nothing good about the
// endpoint, and one cut short by a timeout already carries a long time.
//
// The averages belong to the endpoints the engine keeps across an in-place endpoint update, and
// to their addresses across a SetEndpoints that replaces an endpoint by an equal address (a weight
// change): both keep their history. A new table (a snapshot that changes more than endpoints)
// starts the averages afresh.
package ewma

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/core"
)

// ModuleID is the ID this package registers.
const ModuleID core.ModuleID = "lb.ewma"

func init() {
	core.RegisterModule(&EWMA{})
}

// EWMA is the balancer. Its config is empty ({} or nothing).
type EWMA struct {
	state atomic.Pointer[state]
}

// stat is one endpoint's average in nanoseconds; 0 means no sample yet.
type stat struct{ avg atomic.Int64 }

type state struct {
	eps   []*core.Endpoint
	stats []*stat // stats[i] is eps[i]'s
	byEp  map[*core.Endpoint]*stat
}

var (
	_ core.Module           = (*EWMA)(nil)
	_ core.Balancer         = (*EWMA)(nil)
	_ core.BalancerFeedback = (*EWMA)(nil)
)

// CoxswainModule implements core.Module.
func (*EWMA) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(EWMA) }}
}

// ConcurrentSetEndpoints marks SetEndpoints as safe while Pick runs (the state is published
// atomically), so the engine updates the cluster's endpoints in place.
func (*EWMA) ConcurrentSetEndpoints() {}

// SetEndpoints implements core.Balancer. Endpoints of the previous set, the same pointer or the
// same address, keep their average.
func (e *EWMA) SetEndpoints(eps []*core.Endpoint) {
	old := e.state.Load()
	var byAddr map[string]*stat
	if old != nil {
		byAddr = make(map[string]*stat, len(old.eps))
		for i, ep := range old.eps {
			byAddr[ep.HostPort] = old.stats[i]
		}
	}
	s := &state{eps: eps, stats: make([]*stat, len(eps)), byEp: make(map[*core.Endpoint]*stat, len(eps))}
	for i, ep := range eps {
		st := byAddr[ep.HostPort]
		if old != nil && old.byEp[ep] != nil {
			st = old.byEp[ep]
		}
		if st == nil {
			st = new(stat)
		}
		s.stats[i], s.byEp[ep] = st, st
	}
	e.state.Store(s)
}

// unsampledCost ranks an unsampled endpoint that is already being probed after every sampled one
// of equal load (an hour, in ns), while keeping cost products far from overflow.
const unsampledCost = float64(time.Hour)

// Pick implements core.Balancer. It scans from a random endpoint, so that ties spread.
func (e *EWMA) Pick(*core.PickInfo) *core.Endpoint {
	s := e.state.Load()
	if s == nil || len(s.eps) == 0 {
		return nil
	}
	n := len(s.eps)
	if n == 1 {
		return s.eps[0]
	}
	start := rand.IntN(n)
	best, bestCost := -1, math.Inf(1)
	for k := range n {
		i := start + k
		if i >= n {
			i -= n
		}
		ep := s.eps[i]
		active := max(ep.Active.Load(), 0)
		avg := s.stats[i].avg.Load()
		if avg == 0 && active == 0 {
			return ep // probe it
		}
		lat := float64(avg)
		if avg == 0 {
			lat = unsampledCost
		}
		if cost := lat * float64(active+1) / float64(ep.Weight); cost < bestCost {
			best, bestCost = i, cost
		}
	}
	return s.eps[best]
}

// Done implements core.BalancerFeedback: it folds rtt into ep's average.
func (e *EWMA) Done(ep *core.Endpoint, rtt time.Duration, failed bool) {
	s := e.state.Load()
	if s == nil {
		return
	}
	st := s.byEp[ep]
	if st == nil {
		return // picked from a previous set
	}
	st.observe(int64(max(rtt, 1)), failed)
}

// observe folds sample (ns, at least 1) in: avg += (sample - avg) / 8, the first sample taken as
// it is.
func (st *stat) observe(sample int64, failed bool) {
	for {
		old := st.avg.Load()
		next := sample
		if old != 0 {
			if failed && sample <= old {
				return
			}
			next = old + (sample-old)/8
			if next == 0 {
				next = 1
			}
		} else if failed {
			return
		}
		if st.avg.CompareAndSwap(old, next) {
			return
		}
	}
}
