package proxy

import (
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Virtual hosts shared whole, by runs (see reuse.go for the rest of incremental builds). A route
// change replaces one virtual host of a server that may have thousands. The shape pass cuts each
// server's virtual hosts into runs (shape.go, ~64 each) and, with Options.SharedMessages, hands
// the build the very runs of the previous snapshot that did not change; the build takes the
// serving table's compiled run built from such a run as it is (one reference, its index entries
// already in the index), and compiles only the runs that are new: in them each unchanged virtual
// host is shared (one sum comparison), a changed one compiled with the unchanged routes of the
// serving virtual host of its hostname. The server's host index is a fork of the serving one's
// (hostindex.go) with the entries of the new runs replaced and those of removed virtual hosts
// dropped. So a change costs its runs, one pointer per run in the server's list of runs and
// a few shards of the index copied, not a comparison and a reference per virtual host.

// builtRun is a run of compiled virtual hosts, built from one run of a digest (from): a build
// whose digest has that very run again shares it whole. It holds a reference on each of its
// virtual hosts and is held by every table that serves it.
type builtRun struct {
	from  *vrun
	parts []*builtVhost
	// extras are its virtual hosts' routes that contribute to the table as a whole (record).
	extras []*builtRoute
	refs   atomic.Int64
	// listed is the last build (Proxy.builds) that took it whole. Under Proxy.mu only.
	listed uint64
}

// release drops one table's hold; the last one releases its virtual hosts.
func (br *builtRun) release(log *zap.Logger) {
	if br.refs.Add(-1) != 0 {
		return
	}
	for i := len(br.parts) - 1; i >= 0; i-- {
		br.parts[i].release(log)
	}
}

// builtVhost is a compiled virtual host as a part of runs: it holds a reference on each of its
// routes and is held by every run that lists it.
type builtVhost struct {
	v      vhost
	sum    sum           // its hostname and its routes' sums (vhostSums.all)
	routes []*builtRoute // in precedence order, one reference each
	// extras are those of its routes that contribute to the table as a whole (record).
	extras []*builtRoute
	refs   atomic.Int64
	// run is its run in the serving table (the run of the last build that listed it; a failed
	// build puts it back), listed the last build that listed it on its own (compiled it, or took
	// it into a new run). Under Proxy.mu only.
	run    *builtRun
	listed uint64
}

// adopt lists br among bv's routes, holding the reference the caller took or made.
func (bv *builtVhost) adopt(br *builtRoute) {
	bv.routes = append(bv.routes, br)
	bv.v.routes = append(bv.v.routes, nil) // set once compiled (builder.vhost)
	if br.extra != nil || br.rt == nil {   // a route being compiled may gain extras
		bv.extras = append(bv.extras, br)
	}
}

// release drops one run's hold; the last one releases its routes.
func (bv *builtVhost) release(log *zap.Logger) {
	if bv.refs.Add(-1) != 0 {
		return
	}
	for i := len(bv.routes) - 1; i >= 0; i-- {
		bv.routes[i].release(log)
	}
}

// movedVhost is a virtual host's run before a build listed it in another: put back if the build
// fails, so that the serving table's virtual hosts name their runs in it.
type movedVhost struct {
	bv  *builtVhost
	run *builtRun
}

// baseServer returns the serving table's server that srv, the next server built, replaces: the
// one at the same place (or, when servers were added or removed in front, the one of the same
// listener and hostname), if it is of the same Gateway and its listener serves the same route
// API. Each is taken once. nil for none: every virtual host is compiled.
func (b *builder) baseServer(srv *server) *server {
	if b.serving == nil {
		return nil
	}
	servers := b.serving.servers
	var base *server
	if k := len(b.t.servers) - 1; k < len(servers) && servers[k].listener == srv.listener && servers[k].hostname == srv.hostname {
		base = servers[k]
	} else {
		if b.serverIndex == nil {
			b.serverIndex = make(map[serverKey]*server, len(servers))
			for _, s := range servers {
				b.serverIndex[serverKey{s.listener, s.hostname}] = s
			}
		}
		base = b.serverIndex[serverKey{srv.listener, srv.hostname}]
	}
	if base == nil || base.claimed == b.gen || base.gateway != srv.gateway || base.api != srv.api {
		return nil
	}
	base.claimed = b.gen
	return base
}

type serverKey struct{ listener, hostname string }

// vhosts compiles s's virtual hosts into srv, sharing what it can with base (nil for none).
func (b *builder) vhosts(srv, base *server, s *irv1.Server) error {
	runs := b.digest.serverRuns(len(b.t.servers) - 1)
	if b.digest == nil && len(s.GetVirtualHosts()) > 0 {
		// A builder a test made by hand, which shares nothing: one run of zero sums.
		runs = []*vrun{{vhs: s.GetVirtualHosts(), sums: make([]vhostSums, len(s.GetVirtualHosts()))}}
	}
	if n := len(s.GetVirtualHosts()); runsLen(runs) != n {
		return fmt.Errorf("the digest has %d virtual hosts, the server %d", runsLen(runs), n) // not reached
	}
	srv.runs = make([]*builtRun, 0, len(runs))
	if base != nil {
		srv.vhosts = base.vhosts.fork()
	}
	// First the runs taken whole, so that a virtual host compiled below can tell a hostname a
	// taken run lists (a duplicate) from one a replaced run listed.
	var taken []*builtRun // by digest run, nil for one to build
	if base != nil {
		taken = make([]*builtRun, len(runs))
		f := builtRunFinder{runs: base.runs}
		for i, dr := range runs {
			if br := f.find(dr, b.digest.gen); br != nil && br.listed != b.gen && b.runShared(br) {
				br.listed = b.gen
				taken[i] = br
			}
		}
	}
	for i, dr := range runs {
		if taken != nil && taken[i] != nil {
			br := taken[i]
			br.refs.Add(1)
			srv.runs = append(srv.runs, br)
			for _, r := range br.extras {
				b.record(r)
			}
			continue
		}
		if err := b.run(srv, base, dr); err != nil {
			return err
		}
	}
	if base != nil {
		b.dropRemoved(srv, base)
	}
	return nil
}

// run compiles the digest run dr into srv, sharing base's unchanged virtual hosts.
func (b *builder) run(srv, base *server, dr *vrun) error {
	nr := &builtRun{from: dr, parts: make([]*builtVhost, 0, len(dr.vhs))}
	nr.refs.Store(1)
	srv.runs = append(srv.runs, nr) // now: a failed build releases it with the table
	for i, vh := range dr.vhs {
		vs, hostname := dr.sums[i], vh.GetHostname()
		old := b.oldVhost(base, hostname)
		bv := old
		if old != nil && old.sum == vs.all && b.vhostShared(old) {
			old.refs.Add(1)
			nr.parts = append(nr.parts, old)
			for _, br := range old.extras {
				b.record(br)
			}
		} else {
			var err error
			if bv, err = b.vhost(nr, vh, vs, old); err != nil {
				return err
			}
		}
		b.moved = append(b.moved, movedVhost{bv: bv, run: bv.run})
		bv.run, bv.listed = nr, b.gen
		nr.extras = append(nr.extras, bv.extras...)
		if err := b.index(srv, base, hostname, bv); err != nil {
			return fmt.Errorf("virtual host: %w", err)
		}
	}
	return nil
}

// index lists bv under hostname in srv's host index: added to a new index; in a fork of base's,
// put in place of the entry of a virtual host this table no longer has (replaced or removed), a
// duplicate if this table has that one too.
func (b *builder) index(srv, base *server, hostname string, bv *builtVhost) error {
	if base == nil {
		return srv.vhosts.add(hostname, &bv.v)
	}
	cur, ok := srv.vhosts.get(hostname)
	if ok && cur == &bv.v {
		return nil // shared, and still listed
	}
	if ok && (cur.part.listed == b.gen || cur.part.run.listed == b.gen) {
		return fmt.Errorf("hostname %q listed twice", hostname)
	}
	return srv.vhosts.set(hostname, &bv.v)
}

// dropRemoved removes from srv's index the entries of base's virtual hosts this table does not
// have: those of base's runs not taken whole that no run of this build listed again.
func (b *builder) dropRemoved(srv, base *server) {
	for _, br := range base.runs {
		if br.listed == b.gen {
			continue
		}
		for _, old := range br.parts {
			if old.listed == b.gen {
				continue
			}
			if cur, ok := srv.vhosts.get(old.v.hostname); ok && cur == &old.v {
				srv.vhosts.del(old.v.hostname)
			}
		}
	}
}

// revertMoves puts the virtual hosts a failed build listed back in their serving runs.
func (b *builder) revertMoves() {
	for i := len(b.moved) - 1; i >= 0; i-- {
		b.moved[i].bv.run = b.moved[i].run
	}
	b.moved = nil
}

// oldVhost returns base's virtual host of hostname if this build has not listed it yet, on its
// own or in a run taken whole; nil for none.
func (b *builder) oldVhost(base *server, hostname string) *builtVhost {
	if base == nil {
		return nil
	}
	v, ok := base.vhosts.get(hostname)
	if !ok || v.hostname != hostname {
		return nil
	}
	old := v.part
	if old.listed == b.gen || old.run.listed == b.gen {
		return nil
	}
	return old
}

// runShared reports whether every route of br can serve in the table being built (its Gateway
// is, by baseServer).
func (b *builder) runShared(br *builtRun) bool {
	if b.sameClusters {
		return true
	}
	for _, bv := range br.parts {
		if !b.vhostShared(bv) {
			return false
		}
	}
	return true
}

// vhostShared reports whether every route of old can serve in the table being built: its
// clusters are all this table's (its Gateway is, by baseServer).
func (b *builder) vhostShared(old *builtVhost) bool {
	if b.sameClusters {
		return true
	}
	for _, br := range old.routes {
		if !b.depsShared(br) {
			return false
		}
	}
	return true
}

// vhost compiles vh, sharing the unchanged routes of old (the virtual host it replaces, nil for
// none), and lists it in the run nr.
func (b *builder) vhost(nr *builtRun, vh *irv1.VirtualHost, vs vhostSums, old *builtVhost) (*builtVhost, error) {
	bv := &builtVhost{sum: vs.all, listed: b.gen}
	bv.v = vhost{hostname: vh.GetHostname(), routes: make([]*route, 0, len(vh.GetRoutes())), part: bv}
	bv.routes = make([]*builtRoute, 0, len(vh.GetRoutes()))
	bv.refs.Store(1)
	nr.parts = append(nr.parts, bv) // now: a failed build releases it with the table
	b.vh, b.old, b.next = bv, old, 0
	b.routeSums, b.routeN = vs.routes, 0
	defer func() { b.vh, b.old = nil, nil }()
	for i, r := range vh.GetRoutes() {
		rt, err := b.route(r)
		if err != nil {
			return nil, fmt.Errorf("virtual host %q: route %s: %w", vh.GetHostname(), r.GetName(), err)
		}
		if rt.api() != b.api {
			return nil, fmt.Errorf("module %s: route %s implements %s, but the listener serves %s routes", b.listenerID, rt.name, rt.api(), b.api)
		}
		bv.v.routes[i] = rt
	}
	// Only routes with extras stay listed there (adopt listed those being compiled too).
	extras := bv.extras[:0]
	for _, br := range bv.extras {
		if br.extra != nil {
			extras = append(extras, br)
		}
	}
	clear(bv.extras[len(extras):])
	bv.extras = extras
	return bv, nil
}

// builtRunFinder finds the serving server's run built from a digest run: at the place after the
// last one found or the next (after a replaced run), else by an index of the runs (made once a
// run was not there).
type builtRunFinder struct {
	runs  []*builtRun
	next  int
	index map[*vrun]int
}

func (f *builtRunFinder) find(dr *vrun, gen uint64) *builtRun {
	if dr.made == gen {
		return nil // new in this digest
	}
	j := f.next
	if j+1 < len(f.runs) && f.runs[j].from != dr && f.runs[j+1].from == dr {
		j++ // the run after a replaced one
	}
	if j >= len(f.runs) || f.runs[j].from != dr {
		if f.index == nil {
			f.index = make(map[*vrun]int, len(f.runs))
			for k, br := range f.runs {
				f.index[br.from] = k
			}
		}
		var ok bool
		if j, ok = f.index[dr]; !ok {
			return nil
		}
	}
	f.next = j + 1
	return f.runs[j]
}

// serverRuns returns the runs of the i-th server visited.
func (d *digest) serverRuns(i int) []*vrun {
	if d == nil || i >= len(d.servers) {
		return nil
	}
	return d.servers[i]
}

func runsLen(runs []*vrun) int {
	n := 0
	for _, r := range runs {
		n += len(r.vhs)
	}
	return n
}
