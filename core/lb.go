package core

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"
)

// Endpoint is one upstream address of a cluster. The engine creates endpoints once per table build;
// balancers read them and may use the counters.
type Endpoint struct {
	Address string
	Port    uint32
	// Weight is the endpoint's relative weight (at least 1).
	Weight uint32
	// HostPort is "address:port", precomputed so the hot path never formats it.
	HostPort string
	// Active counts requests or connections in flight to this endpoint.
	Active atomic.Int64
}

// NewEndpoint returns an endpoint with its HostPort computed and weight at least 1.
func NewEndpoint(address string, port, weight uint32) *Endpoint {
	if weight == 0 {
		weight = 1
	}
	return &Endpoint{
		Address:  address,
		Port:     port,
		Weight:   weight,
		HostPort: net.JoinHostPort(address, strconv.FormatUint(uint64(port), 10)),
	}
}

// PickInfo is what a balancer may look at to choose. Request is nil for TCP and UDP traffic.
type PickInfo struct {
	Request *http.Request
	// Client is the downstream client: for HTTP, core.ClientAddr (the connection's peer, or the
	// address X-Forwarded-For's trusted hops resolve to); for TCP and UDP, the peer. Unmapped; the
	// zero value means unknown.
	Client netip.AddrPort
}

// Balancer is implemented by "lb.*" modules. One instance is loaded per cluster per table build and
// handed the cluster's endpoints through SetEndpoints before first use. Pick runs concurrently on the
// hot path: no locks held across calls, no allocation, and info is not kept after it returns (the
// engine reuses it). It returns nil when no endpoint can be chosen.
type Balancer interface {
	SetEndpoints(eps []*Endpoint)
	Pick(info *PickInfo) *Endpoint
}

// BalancerFeedback is implemented by balancers that learn from how their picks went (lb.ewma). The
// engine discovers it once per table build, so a balancer without it costs nothing per request. Done
// is called once for every Pick that returned an endpoint, after the engine's exchange with it has
// ended, concurrently with Pick and other Done calls (no locks, no allocation):
//
//   - HTTP: after the forwarder returned, that is once the whole response has been relayed. rtt is
//     the time from just before forwarding to then. failed reports that the endpoint answered 5xx,
//     that the exchange failed (the connect was refused or timed out, the connection was reset,
//     the response was malformed or its body broke off), or that the request's context had ended
//     by then (the route's or backend's timeout, or the client went away: rtt is then no sample
//     of the endpoint's speed either).
//   - TCP, TLS and UDP routes: right after the dial. rtt is the connect time (next to nothing for
//     UDP, whose dial only binds a socket); failed is a dial error.
//
// ep may no longer be among the endpoints of the last SetEndpoints (its pick came from the
// previous set): ignore it then.
type BalancerFeedback interface {
	Done(ep *Endpoint, rtt time.Duration, failed bool)
}

// DefaultBalancer is the balancer a cluster gets when its snapshot names none.
const DefaultBalancer ModuleID = "lb.round_robin"
