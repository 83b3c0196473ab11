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
	cl := u.cluster
	// Each breaker is asked once per request, so that one counts one rejection per request it
	// refused (a balancer may return the same endpoint again).
	var refused [maxPicks + 1]*core.Endpoint
	n := 0
	if cl.sticky != nil {
		if ep = cl.sticky.pinned(r); ep != nil {
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
	for range maxPicks {
		ep = cl.balancer.Pick(info)
		if ep == nil {
			return nil, nil, rejected
		}
		if slices.Contains(refused[:n], ep) {
			continue
		}
		br, ok := u.breakers.admit(ep)
		if !ok {
			refused[n], n, rejected = ep, n+1, true
			continue
		}
		if cl.sticky != nil {
			cl.sticky.pin(w, r, ep)
		}
		return ep, br, false
	}
	return nil, nil, true
}
