package proxy

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coxswain-labs/coxswain/core"
)

// breakerSet is the circuit breaker of each endpoint of one (route, cluster), the route being
// the route object (routeObject): all the rules and matches of one HTTPRoute or GRPCRoute share
// their breakers, as they share the object's status.
//
// Its state must outlive a table: a snapshot that changes something else must not close an open
// breaker or forget the errors counted so far. So a set is kept in the proxy's shared state
// (core.Shared) under its route, cluster and configuration (a changed policy starts afresh), and
// every table that has the route gets the same set. The endpoints' breakers are kept by address
// and looked up by *core.Endpoint, which the builder and in-place updates reuse for unchanged
// endpoints; retain, at every swap and in-place update, adds the breakers of new endpoints and
// forgets those of endpoints that left (bounded memory, and their series deleted).
type breakerSet struct {
	route  string
	cfg    breakerConfig
	clock  func() int64
	series *breakerSeries

	byEp atomic.Pointer[map[*core.Endpoint]*epBreaker] // replaced whole by retain
	mu   sync.Mutex                                    // serializes retain and Close
}

var noBreakers = map[*core.Endpoint]*epBreaker{}

func newBreakerSet(route string, cfg breakerConfig, series *breakerSeries) *breakerSet {
	s := &breakerSet{route: route, cfg: cfg, clock: monotonic, series: series}
	s.byEp.Store(&noBreakers)
	return s
}

// admit reports whether ep's breaker lets a request through, and returns the breaker to tell
// how it went. A nil set (no breaker configured) admits everything, and so does an endpoint the
// set does not know (picked from an endpoint set that was just replaced).
func (s *breakerSet) admit(ep *core.Endpoint) (*breaker, bool) {
	if s == nil {
		return nil, true
	}
	e := (*s.byEp.Load())[ep]
	if e == nil {
		return nil, true
	}
	return e.admit()
}

// retain makes eps the set's endpoints: an endpoint whose address had a breaker keeps it (its
// state, whatever its *core.Endpoint), a new address gets a closed one, an address that left is
// forgotten. Called when a table is swapped in and when a cluster's endpoints change in place,
// never per request.
func (s *breakerSet) retain(eps []*core.Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.byEp.Load()
	byAddr := make(map[string]*epBreaker, len(old))
	for _, e := range old {
		byAddr[e.addr] = e
	}
	next := make(map[*core.Endpoint]*epBreaker, len(eps))
	kept := make(map[*epBreaker]bool, len(eps))
	for _, ep := range eps {
		e := byAddr[ep.HostPort]
		if e == nil {
			e = newEpBreaker(&s.cfg, s.clock, ep.HostPort, s.series.acquire(s.route, ep.HostPort))
			byAddr[ep.HostPort] = e
		}
		next[ep] = e
		kept[e] = true
	}
	s.byEp.Store(&next)
	for _, e := range byAddr {
		if !kept[e] {
			s.series.release(s.route, e.addr)
		}
	}
}

// Close forgets every endpoint (core.Shared closes the set when the last table holding it is
// cleaned up).
func (s *breakerSet) Close() error {
	s.retain(nil)
	return nil
}

// routeObject is the route object an IR route belongs to: its name up to "/rule/"
// ("HTTPRoute/ns/name/rule/0/match/0" is "HTTPRoute/ns/name").
func routeObject(name string) string {
	if i := strings.Index(name, "/rule/"); i >= 0 {
		return name[:i]
	}
	return name
}

// breakersOf returns the breakers of route's backends to cl, nil when cl has no circuit breaker.
// The table's cluster lists the sets its routes use, for retain.
func (b *builder) breakersOf(route string, cl *cluster) (*breakerSet, error) {
	if cl.breaker == nil {
		return nil, nil
	}
	series, err := b.p.breakerSeriesOf()
	if err != nil {
		return nil, err
	}
	obj := routeObject(route)
	key := "proxy.circuit_breaker/" + obj + "\x00" + cl.name + "\x00" + cl.breaker.key()
	set, err := core.Shared(b.bc, key, func() (*breakerSet, error) {
		return newBreakerSet(obj, *cl.breaker, series), nil
	})
	if err != nil {
		return nil, err
	}
	x := b.cur.more()
	x.breakers = append(x.breakers, routeBreakers{cl: cl, set: set})
	return set, nil
}

// retainBreakers gives every breaker set of t's clusters the cluster's current endpoints: just
// before t is swapped in, so that a snapshot that fails to build never touches them.
func retainBreakers(t *table) {
	for cl, sets := range t.breakers {
		for _, s := range sets {
			s.retain(cl.set.Load().eps)
		}
	}
}
