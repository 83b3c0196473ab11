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
// An average belongs to the endpoint's address ("host:port"), not to one table: the proxy keeps
// one average per address (core.Shared) while some balancer uses it, so an in-place endpoint
// update, a weight change and a new table (a snapshot that changes more than endpoints) all keep
// the history. Two clusters with the same address share it: they are the same backend. An address
// no balancer uses any more is forgotten (the table holds it weakly).
package ewma

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/coxswain-labs/coxswain/core"
)

// ModuleID is the ID this package registers.
const ModuleID core.ModuleID = "lb.ewma"

func init() {
	core.RegisterModule(&EWMA{})
}

// EWMA is the balancer. Its config is empty ({} or nothing).
type EWMA struct {
	averages *averages
	state    atomic.Pointer[state]
}

// averages is the proxy's table of averages by address.
type averages struct {
	mu   sync.Mutex
	byHP map[string]weak.Pointer[stat]
	live int // entries alive at the last prune
}

func newAverages() *averages { return &averages{byHP: map[string]weak.Pointer[stat]{}} }

// get returns the average of hostport, made when no balancer holds one.
func (a *averages) get(hostport string) *stat {
	if st := a.byHP[hostport].Value(); st != nil {
		return st
	}
	st := new(stat)
	a.byHP[hostport] = weak.Make(st)
	return st
}

// prune drops the entries of averages no balancer holds, once they could be half of the table.
func (a *averages) prune() {
	if len(a.byHP) < 2*a.live+64 {
		return
	}
	for hp, p := range a.byHP {
		if p.Value() == nil {
			delete(a.byHP, hp)
		}
	}
	a.live = len(a.byHP)
}

// stat is one endpoint's average in nanoseconds; 0 means no sample yet. It fills a cache line,
// so that Done on one endpoint does not slow the others' (and so that it is never a tiny
// allocation, which would keep it from being collected while a neighbour lives).
type stat struct {
	avg atomic.Int64
	_   [56]byte
}

type state struct {
	eps   []*core.Endpoint
	stats []*stat // stats[i] is eps[i]'s
	byEp  map[*core.Endpoint]*stat
}

var (
	_ core.Module           = (*EWMA)(nil)
	_ core.Provisioner      = (*EWMA)(nil)
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

// Provision implements core.Provisioner: it joins the proxy's table of averages.
func (e *EWMA) Provision(bc *core.BuildContext) error {
	a, err := core.Shared(bc, string(ModuleID)+"/averages", func() (*averages, error) { return newAverages(), nil })
	e.averages = a
	return err
}

// SetEndpoints implements core.Balancer.
func (e *EWMA) SetEndpoints(eps []*core.Endpoint) {
	if e.averages == nil {
		e.averages = newAverages() // not provisioned (a bare instance)
	}
	s := &state{eps: eps, stats: make([]*stat, len(eps)), byEp: make(map[*core.Endpoint]*stat, len(eps))}
	a := e.averages
	a.mu.Lock()
	for i, ep := range eps {
		st := a.get(ep.HostPort)
		s.stats[i], s.byEp[ep] = st, st
	}
	a.prune()
	a.mu.Unlock()
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
