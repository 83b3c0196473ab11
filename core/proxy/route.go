package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/wrr"
)

// server is one IR Server: the share of a listener for one Gateway listener hostname.
type server struct {
	hostname string
	tls      *irv1.TLS         // nil for cleartext
	cv       *clientValidation // nil: no client certificate check, no subject header
	vhosts   hostIndex[*vhost]
	// listenerFilters is the chain of the Server's listener filters ending in the route
	// lookup; nil without any (listenerfilters.go).
	listenerFilters http.Handler

	// What the next build needs to share its virtual hosts (vhostreuse.go): its listener's name,
	// Gateway and route API, its runs of virtual hosts in snapshot order, and the last build
	// that took it as a base (under Proxy.mu).
	listener, gateway string
	api               RouteAPI
	runs              []*builtRun
	claimed           uint64
}

// vhost is one effective hostname and its routes in precedence order.
type vhost struct {
	hostname string
	routes   []*route
	part     *builtVhost // what holds it (vhostreuse.go)
}

// route is one IR Route compiled: its matcher and its whole handler chain (filters, backend choice,
// backend filters, forwarder), built once per table.
type route struct {
	name    string
	matcher core.HTTPMatcher
	errw    core.HTTPErrorWriter
	timeout time.Duration // whole request; 0 means none
	// deadliner reads the client's own deadline from the request (gRPC), nil for none.
	deadliner core.HTTPDeadliner
	chain     http.Handler
	// gateway is the Gateway(s) of the route's Server and rule the route rule's name ("" when
	// the rule has none), for the access log (set by observeRoute, observeStream).
	gateway, rule string
	// obs are its request series (reqmetrics.go), nil when request metrics are off.
	obs *routeObs

	// Layer-4 routes (l4.go) have one of these instead of a matcher and a chain.
	stream core.StreamRoute
	dgram  core.DatagramRoute
	up     *l4Upstream
	l4obs  *streamObs // nil when request metrics are off
}

// cluster is one IR Cluster: endpoints, their balancer and how to reach them. Its endpoint set is
// the one part of a table that changes in place (fastApply); everything else is immutable.
type cluster struct {
	name     string
	protocol irv1.Cluster_Protocol
	set      atomic.Pointer[epSet]
	balancer core.Balancer
	// feedback is balancer when it implements core.BalancerFeedback, else nil.
	feedback core.BalancerFeedback
	// sticky is the cluster's session persistence, nil for none.
	sticky *sticky
	// live: the balancer takes SetEndpoints while Pick runs (liveBalancer), so the cluster's
	// endpoints can change in place.
	live    bool
	plainUp *upstream // shared by the backends that can (builder.plainUpstream); nil until one does
	// conn is how connections to the endpoints are made and kept (connpolicy.go); transport is the
	// slow path's for it (HTTP clusters only).
	conn      connPolicy
	tlsKey    certKey // of conn.tls, when set
	transport *http.Transport
	// breaker is the cluster's circuit breaker configuration, nil for none; breakers are the
	// sets of its routes in this table (breakersOf).
	breaker *breakerConfig

	// part owns its balancer; head is the sum of its IR without endpoints, which a later build
	// compares to share it (reuse.go).
	part part
	head sum
	// built is the last build (Proxy.builds) that made or shared it: a route is shared only
	// when every cluster it resolved was (reuse.go). Under Proxy.mu only.
	built uint64
}

// liveBalancer is implemented by balancers whose SetEndpoints is safe concurrently with Pick
// (they publish the new endpoints atomically). Clusters with any other balancer are rebuilt with
// their table when their endpoints change.
type liveBalancer interface {
	core.Balancer
	ConcurrentSetEndpoints()
}

func (b *builder) cluster(c *irv1.Cluster) error {
	if _, dup := b.clusters[c.GetName()]; dup {
		return errors.New("listed twice")
	}
	head := b.digest.clusterSum(b.clusterN)
	b.clusterN++
	if cl := b.sharedCluster(c, head); cl != nil {
		if cl.conn.tls != nil {
			b.t.tlsKeys[cl.tlsKey] = struct{}{}
		}
		b.clusters[cl.name] = cl
		b.t.clusters = append(b.t.clusters, cl)
		return nil
	}
	cl := &cluster{name: c.GetName(), protocol: c.GetProtocol(), conn: b.p.fwd.policyOf(c), head: head, built: b.gen}
	b.start(&cl.part)
	b.t.clusterSet.parts = append(b.t.clusterSet.parts, &cl.part) // a failed build releases it with the table
	saved := b.bc
	b.bc = cl.part.bc
	defer func() {
		b.bc = saved
		cl.part.settle()
	}()
	ut, key, err := b.p.upTLS.get(c, b.secrets, &b.p.certs)
	if err != nil {
		return fmt.Errorf("upstream TLS: %w", err)
	}
	if ut != nil {
		cl.conn.tls, cl.tlsKey = ut, key
		b.t.tlsKeys[key] = struct{}{}
	}
	if cl.protocol == irv1.Cluster_HTTP1 || cl.protocol == irv1.Cluster_H2C {
		cl.transport = b.p.fwd.transports.get(cl.protocol == irv1.Cluster_H2C, cl.conn)
		if cb := c.GetCircuitBreaker(); cb != nil {
			cfg := breakerConfigOf(cb)
			cl.breaker = &cfg
		}
	}
	eps, _ := endpointsOf(c, b.previousEndpoints(c.GetName()))
	mc := c.GetBalancer()
	var bal core.Balancer
	if mc.GetId() == "" {
		mc = &irv1.ModuleConfig{Id: string(core.DefaultBalancer), Json: mc.GetJson()}
	}
	bal, err = core.Load[core.Balancer](b.bc, mc)
	if err != nil {
		return fmt.Errorf("balancer: %w", err)
	}
	if sp := c.GetSessionPersistence(); sp != nil {
		if cl.sticky, err = newSticky(cl.name, sp); err != nil {
			return fmt.Errorf("session persistence: %w", err)
		}
		cl.sticky.setEndpoints(eps)
	}
	cl.set.Store(b.p.fwd.newEpSet(cl, eps))
	bal.SetEndpoints(eps)
	cl.balancer = bal
	cl.feedback, _ = bal.(core.BalancerFeedback)
	_, cl.live = bal.(liveBalancer)
	b.clusters[c.GetName()] = cl
	b.t.clusters = append(b.t.clusters, cl)
	return nil
}

// compileRoute compiles r into b.cur, whose build context loads its modules.
func (b *builder) compileRoute(r *irv1.Route) (*route, error) {
	if r.GetMatch() == nil {
		return nil, errors.New("no match module")
	}
	mod, err := core.Load[core.Module](b.bc, r.GetMatch())
	if err != nil {
		return nil, fmt.Errorf("match: %w", err)
	}
	if rt, ok, err := b.l4Route(r, mod); ok {
		if err == nil {
			err = b.observeStream(rt, r)
		}
		return rt, err
	}
	m, ok := mod.(core.HTTPMatcher)
	if !ok {
		return nil, fmt.Errorf("match: module %s implements none of core.HTTPMatcher, core.StreamRoute, core.DatagramRoute", r.GetMatch().GetId())
	}
	rt := &route{
		name:    r.GetName(),
		matcher: m,
		errw:    plainErrors{},
		timeout: time.Duration(r.GetTimeouts().GetRequestMs()) * time.Millisecond,
	}
	if ew, ok := m.(core.HTTPErrorWriter); ok {
		rt.errw = ew
	}
	rt.deadliner, _ = m.(core.HTTPDeadliner)
	if pw, ok := m.(core.HTTPProtocolErrorWriter); ok {
		b.cur.more().noRouteID, b.cur.more().noRoute = r.GetMatch().GetId(), pw
	}
	ruleFilters, err := b.filters(r.GetFilters())
	if err != nil {
		return nil, err
	}
	rt.errw = localErrors(ruleFilters, rt.errw)
	backends := r.GetBackends()
	choice := &backendChoice{errw: rt.errw, backends: make([]http.Handler, 0, len(backends))}
	weights := make([]uint32, len(backends))
	backendTimeout := time.Duration(r.GetTimeouts().GetBackendRequestMs()) * time.Millisecond
	retry, err := b.retryOf(rt.name, r.GetRetry())
	if err != nil {
		return nil, err
	}
	for i, be := range backends {
		h, err := b.backend(rt.name, be, ruleFilters, rt.errw, backendTimeout, retry)
		if err != nil {
			return nil, fmt.Errorf("backend %d (%s): %w", i, be.GetCluster(), err)
		}
		weights[i] = be.GetWeight()
		choice.backends = append(choice.backends, h)
	}
	if err := b.observeRoute(rt, r); err != nil {
		return nil, err
	}
	if len(backends) == 1 && weights[0] > 0 {
		// Most routes have one backend: no choice to make, so no schedule to keep (a table of
		// 10,000 routes would hold as many).
		rt.chain = chain(ruleFilters, choice.backends[0])
		return rt, nil
	}
	choice.sched = wrr.New(weights)
	rt.chain = chain(ruleFilters, choice)
	return rt, nil
}

// backend compiles one weighted backend of the IR route named route: its filters, then the
// forwarder. The response filters of the rule and then of the backend run, in that order, on the
// upstream response header.
func (b *builder) backend(route string, be *irv1.Backend, rule []loadedFilter, errw core.HTTPErrorWriter, timeout time.Duration, retry *retryPolicy) (http.Handler, error) {
	own, err := b.filters(be.GetFilters())
	if err != nil {
		return nil, err
	}
	name := be.GetCluster()
	if name == "" {
		return chain(own, &upstream{errw: errw, timeout: timeout}), nil
	}
	cl, ok := b.lookupCluster(name)
	if !ok {
		return nil, fmt.Errorf("cluster %s is not in the snapshot", name)
	}
	if cl.protocol != irv1.Cluster_HTTP1 && cl.protocol != irv1.Cluster_H2C {
		return nil, fmt.Errorf("cluster %s speaks %s, not HTTP", name, cl.protocol)
	}
	var resp []core.HTTPResponseFilter
	for _, fs := range [][]loadedFilter{rule, own} {
		for _, f := range fs {
			if f.resp != nil {
				resp = append(resp, f.resp)
			}
		}
	}
	// A cluster with a circuit breaker has breakers per route, so its backends cannot share the
	// cluster's upstream (the forwarder they can).
	breakers, err := b.breakersOf(route, cl)
	if err != nil {
		return nil, err
	}
	if _, plain := errw.(plainErrors); plain && len(own) == 0 && len(resp) == 0 && timeout == 0 && breakers == nil && retry == nil {
		return b.plainUpstream(cl), nil
	}
	up := &upstream{cluster: cl, errw: errw, timeout: timeout, fwd: b.forwarder(cl, resp, errw), breakers: breakers, retry: retry}
	return chain(own, up), nil
}

// forwarder returns the forwarder of a backend of cl. Forwarders and upstreams hold no
// per-request state, so the backends without response filters whose route answers errors as plain
// text (every HTTPRoute without a ResponseHeaderModifier) share their cluster's: at 10,000 routes
// to a few Services that is a few forwarders instead of 10,000.
func (b *builder) forwarder(cl *cluster, resp []core.HTTPResponseFilter, errw core.HTTPErrorWriter) forwarder {
	if _, plain := errw.(plainErrors); !plain || len(resp) > 0 {
		return b.p.fwd.newForwarder(cl, resp, errw)
	}
	return b.plainUpstream(cl).fwd
}

// plainUpstream is cl's shared upstream: no filter, timeout or error writer of a backend's own.
func (b *builder) plainUpstream(cl *cluster) *upstream {
	if cl.plainUp == nil {
		cl.plainUp = &upstream{cluster: cl, errw: plainErrors{}, fwd: b.p.fwd.newForwarder(cl, nil, plainErrors{})}
	}
	return cl.plainUp
}

// loadedFilter is one filter module and the interfaces it implements.
type loadedFilter struct {
	id   string
	req  core.HTTPRequestFilter
	resp core.HTTPResponseFilter
	mw   core.HTTPMiddleware
}

func (b *builder) filters(mcs []*irv1.ModuleConfig) ([]loadedFilter, error) {
	out := make([]loadedFilter, 0, len(mcs))
	for i, mc := range mcs {
		m, err := core.Load[core.Module](b.bc, mc)
		if err != nil {
			return nil, fmt.Errorf("filter %d: %w", i, err)
		}
		f := loadedFilter{id: mc.GetId()}
		f.req, _ = m.(core.HTTPRequestFilter)
		f.resp, _ = m.(core.HTTPResponseFilter)
		f.mw, _ = m.(core.HTTPMiddleware)
		if f.req == nil && f.resp == nil && f.mw == nil {
			return nil, fmt.Errorf("filter %d: module %s implements none of HTTPRequestFilter, HTTPResponseFilter, HTTPMiddleware", i, f.id)
		}
		out = append(out, f)
	}
	return out, nil
}

// chain wraps next in fs, first filter outermost. A filter that is both a request filter and a
// middleware runs FilterRequest first, then wraps the rest. Response filters are not in the chain:
// the forwarder runs them on the upstream response header.
func chain(fs []loadedFilter, next http.Handler) http.Handler {
	h := next
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].mw != nil {
			h = fs[i].mw.WrapHTTP(h)
		}
		if fs[i].req != nil {
			h = &requestStage{f: fs[i].req, next: h, local: localFilters(fs[:i])}
		}
	}
	return h
}

type requestStage struct {
	f    core.HTTPRequestFilter
	next http.Handler
	// local are the HTTPLocalResponseFilters before f in the chain: an answer f writes itself
	// gets their headers (localreply.go).
	local []core.HTTPLocalResponseFilter
}

func (s *requestStage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(s.local) > 0 {
		// Only f writes through the wrapper; the rest of the chain, and the forwarder's fast
		// path, get w itself.
		if s.f.FilterRequest(&localReplyWriter{ResponseWriter: w, r: r, local: s.local}, r) {
			s.next.ServeHTTP(w, r)
		}
		return
	}
	if s.f.FilterRequest(w, r) {
		s.next.ServeHTTP(w, r)
	}
}

func (rt *route) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rec := recordOf(w); rec != nil {
		rec.rt = rt
	}
	timeout, bounded := rt.timeout, rt.timeout > 0
	if rt.deadliner != nil {
		if d, ok := rt.deadliner.RequestTimeout(r); ok && (!bounded || d < timeout) {
			timeout, bounded = d, true
		}
	}
	if bounded {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	rt.chain.ServeHTTP(w, r)
}

// backendChoice picks one of a route's weighted backends (lock-free, see wrr). With no backend of
// non-zero weight it answers 500, as Gateway API requires.
type backendChoice struct {
	sched    *wrr.Schedule
	backends []http.Handler
	errw     core.HTTPErrorWriter
}

func (c *backendChoice) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := c.sched.Next()
	if i < 0 {
		c.errw.WriteError(w, r, http.StatusInternalServerError, "no backend for this route")
		return
	}
	c.backends[i].ServeHTTP(w, r)
}

// upstream is the end of a backend's chain: choose an endpoint, forward.
type upstream struct {
	cluster *cluster // nil: the backend reference did not resolve
	timeout time.Duration
	errw    core.HTTPErrorWriter
	fwd     forwarder
	// breakers are the circuit breakers of the cluster's endpoints for this backend's route; nil
	// when the cluster has none.
	breakers *breakerSet
	// retry is the route's retry policy (retry.go), nil for none.
	retry *retryPolicy
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if u.cluster == nil {
		u.errw.WriteError(w, r, http.StatusInternalServerError, "backend not resolved")
		return
	}
	if u.retry != nil {
		u.serveRetrying(w, r)
		return
	}
	ep, br, rejected := u.pick(w, r)
	if ep == nil {
		msg := "no endpoint available"
		if rejected {
			msg = "circuit breaker open"
		}
		u.errw.WriteError(w, r, http.StatusServiceUnavailable, msg)
		return
	}
	if u.timeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), u.timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	ep.Active.Add(1)
	defer ep.Active.Add(-1)
	out := outcomeFailed // unless the forwarder returns: it panicked (a bug, in it or a response filter)
	if fb := u.cluster.feedback; fb != nil || br != nil {
		// Deferred (open-coded: no allocation) so that a forwarder's panic still reports the pick.
		defer report(fb, br, ep, r, time.Now(), &out)
	}
	rec := recordOf(w)
	rec.upstreamStart(u.cluster, ep.HostPort)
	out = u.fwd.forward(w, r, ep)
	rec.upstreamEnd()
	if out.aborted() {
		panic(http.ErrAbortHandler) // after out is set: report sees how it ended
	}
}

// report tells the endpoint's breaker and the cluster's balancer how one exchange ended. Feedback
// counts as failed, besides a failed outcome, a context that ended or whose deadline passed: the
// fast path's connection deadline may fire before the context's own timer (as in upstreamStatus).
func report(fb core.BalancerFeedback, br *breaker, ep *core.Endpoint, r *http.Request, start time.Time, out *outcome) {
	br.done(*out)
	if fb == nil {
		return
	}
	end := time.Now()
	ctx := r.Context()
	failed := out.failed() || ctx.Err() != nil
	if dl, ok := ctx.Deadline(); ok && !end.Before(dl) {
		failed = true
	}
	fb.Done(ep, end.Sub(start), failed)
}

// plainErrors answers engine errors as text/plain.
type plainErrors struct{}

func (plainErrors) WriteError(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	http.Error(w, msg, status)
}
