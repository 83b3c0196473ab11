package proxy

import (
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h2client"
)

// epSet is one immutable generation of a cluster's endpoints with the upstream pools of its
// protocol. A cluster publishes it through an atomic pointer, so that a snapshot that changes
// only endpoints (pods come and go) replaces it in place of rebuilding the table (fastApply);
// forwarders read it once per request to find the pool of the endpoint the balancer picked.
type epSet struct {
	eps []*core.Endpoint
	// A one-endpoint cluster (most of them) has no map: its endpoint and pool are here.
	ep0  *core.Endpoint
	h1p0 *h1Pool
	h2p0 *h2client.Pool
	h1   map[*core.Endpoint]*h1Pool
	h2c  map[*core.Endpoint]*h2client.Pool
}

// h1Pool returns the pool of ep, nil when ep is not in the set (a pick made from the previous
// set while this one was published: the caller takes the slow path, which still serves it).
func (s *epSet) h1Pool(ep *core.Endpoint) *h1Pool {
	if ep == s.ep0 {
		return s.h1p0
	}
	return s.h1[ep]
}

func (s *epSet) h2cPool(ep *core.Endpoint) *h2client.Pool {
	if ep == s.ep0 {
		return s.h2p0
	}
	return s.h2c[ep]
}

// newEpSet makes the endpoint set of cl with the endpoints eps, asking the proxy's pools for
// their addresses under cl's connection policy (which keeps them from the next sweep).
func (f *forwarders) newEpSet(cl *cluster, eps []*core.Endpoint) *epSet {
	s := &epSet{eps: eps}
	if len(eps) == 1 {
		s.ep0 = eps[0]
	}
	switch cl.protocol {
	case irv1.Cluster_HTTP1:
		if s.ep0 != nil {
			s.h1p0 = f.pools.pool(s.ep0.HostPort, cl.conn)
			break
		}
		s.h1 = make(map[*core.Endpoint]*h1Pool, len(eps))
		for _, ep := range eps {
			s.h1[ep] = f.pools.pool(ep.HostPort, cl.conn)
		}
	case irv1.Cluster_H2C:
		if s.ep0 != nil {
			s.h2p0 = f.h2cPool(s.ep0.HostPort, cl.conn)
			break
		}
		s.h2c = make(map[*core.Endpoint]*h2client.Pool, len(eps))
		for _, ep := range eps {
			s.h2c[ep] = f.h2cPool(ep.HostPort, cl.conn)
		}
	}
	return s
}

// keep asks the pools and transports for what cl uses again, so that a sweep after an in-place
// update spares the clusters it did not change.
func (f *forwarders) keep(cl *cluster) {
	switch cl.protocol {
	case irv1.Cluster_HTTP1:
		for _, ep := range cl.set.Load().eps {
			f.pools.pool(ep.HostPort, cl.conn)
		}
	case irv1.Cluster_H2C: // h2c pools are not swept: they close when idle
	default:
		return
	}
	f.transports.get(cl.protocol == irv1.Cluster_H2C, cl.conn)
}

// endpointsOf converts a cluster's IR endpoints, reusing from prev the endpoints that did not
// change (same address, port and weight), which keeps their in-flight counters and their place
// in the pool maps.
func endpointsOf(c *irv1.Cluster, prev []*core.Endpoint) (eps []*core.Endpoint, changed bool) {
	in := c.GetEndpoints()
	changed = len(in) != len(prev)
	var byAddr map[epKey]*core.Endpoint
	if len(prev) > 0 {
		byAddr = make(map[epKey]*core.Endpoint, len(prev))
		for _, ep := range prev {
			byAddr[epKey{ep.Address, ep.Port, ep.Weight}] = ep
		}
	}
	eps = make([]*core.Endpoint, 0, len(in))
	for i, ie := range in {
		w := max(ie.GetWeight(), 1)
		ep := byAddr[epKey{ie.GetAddress(), ie.GetPort(), w}]
		if ep == nil {
			ep = core.NewEndpoint(ie.GetAddress(), ie.GetPort(), w)
		}
		if !changed && prev[i] != ep {
			changed = true
		}
		eps = append(eps, ep)
	}
	return eps, changed
}

type epKey struct {
	address      string
	port, weight uint32
}
