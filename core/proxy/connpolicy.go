package proxy

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// connPolicy is how a cluster's connections to its endpoints are made and kept: its
// CoxswainBackendPolicy's connect and idle timeouts, or the proxy's Limits where the cluster sets
// none (0 in a field: no bound).
//
// Upstream connections are pooled by address and shared by every cluster and table that reaches
// that address, so that a new snapshot keeps them warm. A policy is a property of the connections
// themselves (an idle timeout belongs to a pooled connection, not to whichever request used it
// last), so every pool is keyed by (address, policy): the HTTP/1.1 fast path's (h1Pools), the h2c
// client's (h2client.Pools) and the stdlib transports of the slow path (transports). Clusters that reach
// one address under the same policy, the common case, share one pool as before; a cluster with its
// own timeouts gets pools of its own. A cluster's policy changes only with a new table (its shape
// includes the timeouts), whose epSet asks for the new pools; the old ones are swept or idle out.
type connPolicy struct {
	connect time.Duration // bounds a connect to an endpoint
	idle    time.Duration // closes a pooled connection idle this long
	// tls, when set, makes every connection TLS (upstreamtls.go); interned by content, so equal
	// policies compare equal across tables.
	tls *upstreamTLS
}

func defaultPolicy(l Limits) connPolicy {
	return connPolicy{connect: Positive(l.UpstreamDialTimeout), idle: Positive(l.UpstreamIdleConnTimeout)}
}

// policyOf is c's policy: its timeouts, the proxy's defaults for those it leaves at 0.
func (f *forwarders) policyOf(c *irv1.Cluster) connPolicy {
	p := f.defaults
	if ms := c.GetConnectTimeoutMs(); ms > 0 {
		p.connect = time.Duration(ms) * time.Millisecond
	}
	if ms := c.GetIdleTimeoutMs(); ms > 0 {
		p.idle = time.Duration(ms) * time.Millisecond
	}
	return p
}

// dial connects to addr under p: within its connect timeout, and through its TLS handshake when
// it has one.
func (p connPolicy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return p.tls.dial(ctx, p.dialer(), addr)
}

// dialer is the upstream dialer of a connect timeout.
func (p connPolicy) dialer() *net.Dialer {
	return &net.Dialer{Timeout: p.connect, KeepAlive: 30 * time.Second}
}

// transports are the stdlib transports of the slow path (forward.go's reverseProxy), one per
// (protocol, policy). The proxy's default policy has its two for its lifetime; any other's are
// made when a table build first asks and dropped, their idle connections closed, by the first
// sweep after no build asked for them.
type transports struct {
	limits  Limits
	def     connPolicy
	h1, h2c *http.Transport // of def

	mu    sync.Mutex
	other map[transportKey]*http.Transport
	asked map[transportKey]struct{}
}

type transportKey struct {
	h2c bool
	pol connPolicy
}

func newTransports(l Limits) *transports {
	def := defaultPolicy(l)
	return &transports{limits: l, def: def, h1: newTransport(l, def, false), h2c: newTransport(l, def, true),
		other: map[transportKey]*http.Transport{}, asked: map[transportKey]struct{}{}}
}

// get returns the transport of the protocol and policy, making it. Called at table build time.
func (ts *transports) get(h2c bool, pol connPolicy) *http.Transport {
	if pol == ts.def {
		if h2c {
			return ts.h2c
		}
		return ts.h1
	}
	k := transportKey{h2c: h2c, pol: pol}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.asked[k] = struct{}{}
	t := ts.other[k]
	if t == nil {
		t = newTransport(ts.limits, pol, h2c)
		ts.other[k] = t
	}
	return t
}

// sweep drops the transports no build asked for since the last sweep (see h1Pools.sweep). A
// retired table's request still holding one keeps working; its connections then idle out.
func (ts *transports) sweep() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for k, t := range ts.other {
		if _, ok := ts.asked[k]; !ok {
			delete(ts.other, k)
			t.CloseIdleConnections()
		}
	}
	clear(ts.asked)
}

func (ts *transports) closeIdle() {
	ts.h1.CloseIdleConnections()
	ts.h2c.CloseIdleConnections()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range ts.other {
		t.CloseIdleConnections()
	}
}
