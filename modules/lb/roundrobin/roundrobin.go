// Package roundrobin is the "lb.round_robin" balancer: smooth weighted round robin over the
// cluster's endpoint weights, lock-free and allocation-free per pick (see core/proxy/wrr).
package roundrobin

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/proxy/wrr"
)

// ModuleID is the ID this package registers.
const ModuleID core.ModuleID = "lb.round_robin"

func init() {
	core.RegisterModule(&RoundRobin{})
}

// RoundRobin is the balancer. Its config is empty ({} or nothing).
type RoundRobin struct {
	state atomic.Pointer[state]
}

type state struct {
	eps   []*core.Endpoint
	sched *wrr.Schedule
}

var (
	_ core.Module   = (*RoundRobin)(nil)
	_ core.Balancer = (*RoundRobin)(nil)
)

// CoxswainModule implements core.Module.
func (*RoundRobin) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(RoundRobin) }}
}

// ConcurrentSetEndpoints marks SetEndpoints as safe while Pick runs (it publishes the new state
// atomically): the engine then updates a cluster's endpoints in place instead of rebuilding its
// table.
func (*RoundRobin) ConcurrentSetEndpoints() {}

// SetEndpoints implements core.Balancer. The schedule starts at a random position so that proxies
// started together spread their first requests instead of all hitting the first endpoint.
func (rr *RoundRobin) SetEndpoints(eps []*core.Endpoint) {
	weights := make([]uint32, len(eps))
	for i, ep := range eps {
		weights[i] = ep.Weight
	}
	s := &state{eps: eps, sched: wrr.New(weights)}
	if n := s.sched.Len(); n > 1 {
		s.sched.Seek(rand.Uint64N(n))
	}
	rr.state.Store(s)
}

// Pick implements core.Balancer.
func (rr *RoundRobin) Pick(*core.PickInfo) *core.Endpoint {
	s := rr.state.Load()
	if s == nil {
		return nil
	}
	i := s.sched.Next()
	if i < 0 {
		return nil
	}
	return s.eps[i]
}
