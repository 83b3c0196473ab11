package proxy

import (
	"net/http"
	"slices"
	"sync"

	"github.com/coxswain-labs/coxswain/core"
)

// maxPicks bounds how many times one request asks the balancer for an endpoint whose circuit
// breaker admits it: a degraded endpoint's open breaker sends its share of requests to the
// others rather than answering them 503, but a balancer that keeps returning it (a hash of the
// same key) ends the search quickly.
const maxPicks = 3

// pickInfos are the balancers' PickInfo of HTTP requests: Pick escapes its argument (an interface
// call), and a request should not pay an allocation for it. A balancer must not keep it.
var pickInfos = sync.Pool{New: func() any { return new(core.PickInfo) }}

// pick chooses the endpoint of one request: the endpoint the session is pinned to (session
// persistence), when it is still among the cluster's endpoints and its breaker admits the request;
// else the balancer's pick, skipping endpoints whose breaker is open, which then becomes the
// session's pin. It returns the endpoint's breaker (nil when the route's cluster has none);
// rejected reports that every endpoint tried had its breaker open (ep is nil then).
func (u *upstream) pick(w http.ResponseWriter, r *http.Request) (ep *core.Endpoint, br *breaker, rejected bool) {
	return u.pickAvoiding(w, r, nil, nil)
}

// pickAvoiding is pick for a retry: it passes over the endpoints already tried, and comes back to
// one of them only when the balancer offers nothing else (a cluster of one endpoint, a hash),
// preferring one that answered to one that could not be reached (unreachable).
func (u *upstream) pickAvoiding(w http.ResponseWriter, r *http.Request, tried, unreachable []*core.Endpoint) (ep *core.Endpoint, br *breaker, rejected bool) {
	cl := u.cluster
	// Each breaker is asked once per request, so that one counts one rejection per request it
	// refused (a balancer may return the same endpoint again).
	var refused [maxPicks + 1]*core.Endpoint
	n := 0
	if cl.sticky != nil {
		if ep = cl.sticky.pinned(r); ep != nil && !slices.Contains(tried, ep) {
			if br, ok := u.breakers.admit(ep); ok {
				return ep, br, false
			}
			refused[n], n, rejected = ep, n+1, true
		}
	}
	info := pickInfos.Get().(*core.PickInfo)
	*info = core.PickInfo{Request: r, Client: core.ClientAddr(r)}
	defer func() {
		*info = core.PickInfo{}
		pickInfos.Put(info)
	}()
	// again is the first tried endpoint the balancer offered, better one that answered.
	var again *core.Endpoint
	againReached := false
	for range maxPicks {
		ep = cl.balancer.Pick(info)
		if ep == nil {
			if again == nil {
				return nil, nil, rejected
			}
			break
		}
		if slices.Contains(refused[:n], ep) {
			continue
		}
		if slices.Contains(tried, ep) {
			if reached := !slices.Contains(unreachable, ep); again == nil || (reached && !againReached) {
				again, againReached = ep, reached
			}
			continue
		}
		if br, ok := u.admit(w, r, ep); ok {
			return ep, br, false
		}
		refused[n], n, rejected = ep, n+1, true
	}
	if again != nil {
		if br, ok := u.admit(w, r, again); ok {
			return again, br, false
		}
	}
	return nil, nil, true
}

// admit asks ep's breaker and, when it lets the request through, pins the session to ep.
func (u *upstream) admit(w http.ResponseWriter, r *http.Request, ep *core.Endpoint) (*breaker, bool) {
	br, ok := u.breakers.admit(ep)
	if !ok {
		return nil, false
	}
	if cl := u.cluster; cl.sticky != nil {
		cl.sticky.pin(w, r, ep)
	}
	return br, true
}
