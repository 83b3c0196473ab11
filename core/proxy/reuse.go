package proxy

import (
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Incremental builds. A snapshot that changes one route must not recompile the other 4,999, nor
// visit them: the builder shares, with the table serving now, every compiled virtual host whose
// input did not change, whole (vhostreuse.go), and every cluster; within a virtual host that
// changed it shares the routes that did not, and compiles only the rest. What is shared is
// immutable (a route's matcher, filter chain and forwarders; a virtual host's routes; a cluster's
// balancer, connection policy and endpoint set, which changes only by atomic replacement), so two
// tables can serve from it at once, and the swap stays one atomic pointer store: a request still
// reads one table version throughout. The listener and server layers above are rebuilt per table
// (a few small structs each), a server's host index from a copy of the serving one's.
//
// Sharing is decided by content: a route is shared when its deterministic encoding hashes the
// same (digestOf), it sits under a Server of the same Gateway (its request series are labelled
// with it) and every cluster it resolved is shared too (its upstreams point at them); a virtual
// host when its hostname and routes hash the same and the same holds for its routes; a cluster
// when its head (everything but its endpoints) hashes the same and its upstream TLS compiled to
// the same interned value. A shared cluster whose endpoints changed takes them in place at the
// swap, as fastApply does, if its balancer allows; otherwise it is rebuilt, and so are its routes.
// When the snapshot's clusters are the very messages the serving table was built from
// (Options.SharedMessages) and its secrets hash the same, the table takes the serving table's
// whole cluster set without visiting a cluster.
//
// A shared piece keeps its module instances, so their state — a rate limiter's buckets, a
// round-robin position, a balancer's averages — survives unrelated changes even for modules that
// keep no core.Shared state. Each route and cluster is a part: it owns the modules it loaded (its
// own BuildContext) and the request series it holds. Every virtual host holds a reference on its
// routes, every table one on each of its virtual hosts and one on its cluster set, which holds
// one on each of its clusters; the last holder to let go runs the part's modules' Cleanup and
// releases its series.
//
// A changed virtual host looks for its routes in the serving table's virtual host of the same
// hostname (the one it replaces), after where it found the previous one: a route that moved to
// another hostname is compiled again.

// part is a shared piece of compiled tables: the modules it loaded and the series it holds.
type part struct {
	bc     *core.BuildContext // nil once built if it has nothing to clean up (settle)
	series *requestSeries     // nil when it holds none
	held   obsHeld
	// refs counts the tables holding it. Only the serving table's parts are shared (under
	// Proxy.mu), and the serving table holds them, so it never rises from zero.
	refs atomic.Int64
}

// start gives pt a build context of its own, held once (by the table being built).
func (b *builder) start(pt *part) {
	pt.bc = b.p.newBuildContext(b.bc.Context, b.bc.Snapshot)
	pt.bc.Clusters = b
	pt.refs.Store(1)
}

// release drops one table's hold; the last one cleans the part up.
func (pt *part) release(log *zap.Logger) {
	if pt.refs.Add(-1) != 0 {
		return
	}
	if pt.bc != nil {
		if err := pt.bc.Close(); err != nil {
			log.Warn("module cleanup failed", zap.Error(err))
		}
	}
	pt.series.release(&pt.held)
}

// settle drops the part's build context when it has nothing to clean up and no series to
// release: at 10,000 routes of stateless modules that is 10,000 contexts fewer.
func (pt *part) settle() {
	pt.bc.Snapshot, pt.bc.Clusters = nil, nil // as the table's: no decoded IR kept alive
	if !pt.bc.HasCleanups() && pt.series == nil {
		pt.bc = nil
	}
}

// builtRoute is a compiled route as a part, with what decides whether the next table shares it.
type builtRoute struct {
	part
	rt   *route
	key  routeKey
	deps []*cluster // every cluster it resolved (backends, modules' lookups, series)
	// extra is what few routes have; nil for the others.
	extra *routeExtra
	// claimed is the build (Proxy.builds) that last looked at it for sharing: each build takes
	// a compiled route at most once. It changes under Proxy.mu only.
	claimed uint64
}

// routeExtra is the rarer part of a builtRoute.
type routeExtra struct {
	// noRoute is its match module when that answers unrouted requests in its protocol.
	noRouteID string
	noRoute   core.HTTPProtocolErrorWriter
	breakers  []routeBreakers
}

func (br *builtRoute) more() *routeExtra {
	if br.extra == nil {
		br.extra = &routeExtra{}
	}
	return br.extra
}

// routeKey is what a compiled route was compiled from besides its clusters.
type routeKey struct {
	sum     sum
	gateway string // of its Server, in its request series' labels
}

// routeBreakers is the breaker set a route has for one cluster.
type routeBreakers struct {
	cl  *cluster
	set *breakerSet
}

// clusterSet is the clusters of a table, held once by each table that serves them: a table whose
// snapshot changed no cluster takes the serving table's set whole.
type clusterSet struct {
	parts []*part // one reference each
	refs  atomic.Int64
}

func newClusterSet() *clusterSet {
	cs := &clusterSet{}
	cs.refs.Store(1)
	return cs
}

// release drops one table's hold; the last one releases the clusters, newest first.
func (cs *clusterSet) release(log *zap.Logger) {
	if cs.refs.Add(-1) != 0 {
		return
	}
	for i := len(cs.parts) - 1; i >= 0; i-- {
		cs.parts[i].release(log)
	}
}

// endpointUpdate is a shared cluster's new endpoints, stored at the swap (applyEndpointUpdates).
type endpointUpdate struct {
	cl  *cluster
	eps []*core.Endpoint
}

// route compiles r or shares the compilation of it in the virtual host the one being built
// replaces, and lists it in that virtual host (b.vh).
func (b *builder) route(r *irv1.Route) (*route, error) {
	key := routeKey{sum: b.nextSum(&b.routeN, b.routeSums), gateway: b.gateway}
	if br := b.reusable(key); br != nil {
		br.refs.Add(1)
		b.vh.adopt(br)
		b.record(br)
		return br.rt, nil
	}
	br := &builtRoute{key: key}
	b.start(&br.part)
	b.vh.adopt(br) // now: a failed build releases it with the virtual host
	saved := b.bc
	b.bc, b.cur = br.bc, br
	rt, err := b.compileRoute(r)
	b.bc, b.cur = saved, nil
	br.settle()
	if err != nil {
		return nil, err
	}
	br.rt = rt
	b.record(br)
	return rt, nil
}

// nextSum returns sums[*n] and advances *n; a zero sum without a digest (a builder a test made
// by hand, which shares nothing).
func (b *builder) nextSum(n *int, sums []sum) sum {
	i := *n
	*n++
	if i < len(sums) {
		return sums[i]
	}
	return sum{}
}

// clusterSum returns the sum of the i-th cluster, zero for none.
func (d *digest) clusterSum(i int) sum {
	if d == nil || i >= len(d.clusters) {
		return sum{}
	}
	return d.clusters[i].sum
}

// reusable returns a compiled route with key of the virtual host being replaced (b.old) whose
// clusters are all this table's, nil for none. It looks after the route found last, then from
// the start. Routes of equal content (one HTTPRoute rule under several hostnames, or twice in a
// virtual host) are taken one each, so the table has as many instances as a full build would.
func (b *builder) reusable(key routeKey) *builtRoute {
	if b.old == nil {
		return nil
	}
	routes := b.old.routes
	for k := range routes {
		i := (b.next + k) % len(routes)
		if br := routes[i]; br.key == key && br.claimed != b.gen {
			if b.claim(br) {
				b.next = i + 1
				return br
			}
			return nil
		}
	}
	return nil
}

// claim takes br for this build if its clusters are shared too.
func (b *builder) claim(br *builtRoute) bool {
	br.claimed = b.gen
	return b.depsShared(br)
}

// depsShared reports whether every cluster br resolved is one of the table being built.
func (b *builder) depsShared(br *builtRoute) bool {
	if b.sameClusters {
		return true
	}
	for _, cl := range br.deps {
		if cl.built != b.gen {
			return false // rebuilt: br's upstreams point at the old one
		}
	}
	return true
}

// record adds what br contributes to the table as a whole: its breaker sets, its protocol's
// unrouted answer.
func (b *builder) record(br *builtRoute) {
	if x := br.extra; x != nil {
		for _, rb := range x.breakers {
			b.t.addBreakers(rb.cl, rb.set)
		}
		if x.noRoute != nil {
			b.t.addNoRoute(x.noRouteID, x.noRoute)
		}
	}
}

// lookupCluster returns the cluster name, recording it as a dependency of the route being
// compiled.
func (b *builder) lookupCluster(name string) (*cluster, bool) {
	cl, ok := b.clusters[name]
	if ok && b.cur != nil && !slices.Contains(b.cur.deps, cl) {
		b.cur.deps = append(b.cur.deps, cl)
	}
	return cl, ok
}

// sharedCluster returns the serving table's cluster named like c when the table being built can
// share it, having held it and queued its endpoint change (if any) for the swap; nil otherwise.
func (b *builder) sharedCluster(c *irv1.Cluster, head sum) *cluster {
	if b.serving == nil {
		return nil
	}
	var old *cluster
	if i := b.clusterN - 1; i < len(b.serving.clusters) && b.serving.clusters[i].name == c.GetName() {
		old = b.serving.clusters[i] // where it was: no map probe
	} else {
		old = b.serving.byName[c.GetName()]
	}
	if old == nil || old.head != head || old.built == b.gen {
		return nil
	}
	ut, _, err := b.p.upTLS.get(c, b.secrets, &b.p.certs)
	if err != nil || ut != old.conn.tls {
		return nil // rebuilt: the build reports the error, or compiles the new TLS
	}
	eps, changed := endpointsOf(c, old.set.Load().eps)
	if changed && !old.live {
		return nil
	}
	old.part.refs.Add(1)
	b.t.clusterSet.parts = append(b.t.clusterSet.parts, &old.part)
	old.built = b.gen
	if changed {
		b.t.updates = append(b.t.updates, endpointUpdate{cl: old, eps: eps})
	} else {
		b.p.fwd.keep(old) // spares its pools and transport at the swap's sweep
	}
	return old
}

// addBreakers records a breaker set of cl's in t.
func (t *table) addBreakers(cl *cluster, set *breakerSet) {
	if t.breakers == nil {
		t.breakers = map[*cluster][]*breakerSet{}
	}
	for _, s := range t.breakers[cl] {
		if s == set {
			return
		}
	}
	t.breakers[cl] = append(t.breakers[cl], set)
}

// applyEndpointUpdates gives the shared clusters of t, which is being swapped in, their new
// endpoints, as fastApply does for a table serving (p.mu is held).
func (p *Proxy) applyEndpointUpdates(t *table) {
	for _, u := range t.updates {
		for _, s := range t.breakers[u.cl] {
			s.retain(u.eps)
		}
		u.cl.set.Store(p.fwd.newEpSet(u.cl, u.eps))
		if u.cl.sticky != nil {
			u.cl.sticky.setEndpoints(u.eps)
		}
		u.cl.balancer.SetEndpoints(u.eps)
		p.fwd.keep(u.cl)
	}
	t.updates = nil
}
