// Package leastconn is the "lb.least_conn" balancer: each pick goes to the endpoint with the
// fewest requests (HTTP) or connections (TCP, UDP sessions) in flight relative to its weight.
//
// The in-flight counts are the engine's core.Endpoint.Active counters, which it increments
// before forwarding and decrements when that exchange ends, once per pick: a later pick of the
// same request (a retry) therefore never inherits the earlier one's count. Endpoints the engine
// keeps across an in-place endpoint update keep their counters, so the balancer's state survives
// it without any state of its own.
package leastconn

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/coxswain-labs/coxswain/core"
)

// ModuleID is the ID this package registers.
const ModuleID core.ModuleID = "lb.least_conn"

func init() {
	core.RegisterModule(&LeastConn{})
}

// LeastConn is the balancer. Its config is empty ({} or nothing).
type LeastConn struct {
	eps atomic.Pointer[[]*core.Endpoint]
}

var (
	_ core.Module   = (*LeastConn)(nil)
	_ core.Balancer = (*LeastConn)(nil)
)

// CoxswainModule implements core.Module.
func (*LeastConn) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(LeastConn) }}
}

// ConcurrentSetEndpoints marks SetEndpoints as safe while Pick runs (the slice is published
// atomically), so the engine updates the cluster's endpoints in place.
func (*LeastConn) ConcurrentSetEndpoints() {}

// SetEndpoints implements core.Balancer.
func (lc *LeastConn) SetEndpoints(eps []*core.Endpoint) {
	lc.eps.Store(&eps)
}

// Pick implements core.Balancer. It scans every endpoint, from a random one so that ties (an idle
// cluster) spread instead of all going to the first, and keeps the lowest (active+1)/weight:
// the +1 counts the request being placed, which makes a heavier endpoint win between two idle
// ones. The comparison is by cross-multiplication, in integers.
func (lc *LeastConn) Pick(*core.PickInfo) *core.Endpoint {
	p := lc.eps.Load()
	if p == nil || len(*p) == 0 {
		return nil
	}
	eps := *p
	n := len(eps)
	if n == 1 {
		return eps[0]
	}
	start := rand.IntN(n)
	best := eps[start]
	bestLoad, bestWeight := uint64(max(best.Active.Load(), 0))+1, uint64(best.Weight)
	for k := 1; k < n; k++ {
		i := start + k
		if i >= n {
			i -= n
		}
		ep := eps[i]
		load := uint64(max(ep.Active.Load(), 0)) + 1
		if load*bestWeight < bestLoad*uint64(ep.Weight) {
			best, bestLoad, bestWeight = ep, load, uint64(ep.Weight)
		}
	}
	return best
}
