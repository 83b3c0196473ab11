package proxy

import (
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Virtual hosts shared whole (see reuse.go for the rest of incremental builds). A route change
// replaces one virtual host of a server that may have thousands: the build walks the server's
// virtual hosts beside the serving table's (a sum comparison each), takes every unchanged one as
// it is (its compiled routes, its index entry) and compiles only the changed ones, into a copy of
// the serving server's host index. So the cost per change is one comparison and one reference per
// virtual host, not a route lookup, a struct and an index insertion per route.

// builtVhost is a compiled virtual host as a part of tables: it holds a reference on each of its
// routes and is held by every table that serves it.
type builtVhost struct {
	v      vhost
	sum    sum           // its hostname and its routes' sums (digest.vhosts)
	routes []*builtRoute // in precedence order, one reference each
	// extras are those of its routes that contribute to the table as a whole (record).
	extras []*builtRoute
	refs   atomic.Int64
	// claimed is the last build (Proxy.builds) that took or replaced it, listed the last that
	// listed it in its table, pos its index in its server's parts in the table that listed it
	// last. Under Proxy.mu only.
	claimed, listed uint64
	pos             int
}

// adopt lists br among bv's routes, holding the reference the caller took or made.
func (bv *builtVhost) adopt(br *builtRoute) {
	bv.routes = append(bv.routes, br)
	bv.v.routes = append(bv.v.routes, nil) // set once compiled (builder.vhost)
	if br.extra != nil || br.rt == nil {   // a route being compiled may gain extras
		bv.extras = append(bv.extras, br)
	}
}

// release drops one table's hold; the last one releases its routes.
func (bv *builtVhost) release(log *zap.Logger) {
	if bv.refs.Add(-1) != 0 {
		return
	}
	for i := len(bv.routes) - 1; i >= 0; i-- {
		bv.routes[i].release(log)
	}
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
	vhs := s.GetVirtualHosts()
	srv.parts = make([]*builtVhost, 0, len(vhs))
	if base != nil {
		srv.vhosts = base.vhosts.clone()
	}
	b.vpos = 0
	taken := 0 // of base's virtual hosts
	for _, vh := range vhs {
		vsum := b.nextSum(&b.vhostN, b.digest.vhostsOrNil())
		old := b.oldVhost(base, vh.GetHostname())
		if old != nil {
			taken++
		}
		if old != nil && old.sum == vsum && b.vhostShared(old) {
			// Its index entry is in the copy: no virtual host of this build took its hostname,
			// or it would have been claimed (below).
			old.refs.Add(1)
			old.pos, old.listed = len(srv.parts), b.gen
			srv.parts = append(srv.parts, old)
			for _, br := range old.extras {
				b.record(br)
			}
			continue
		}
		bv, err := b.vhost(srv, vh, vsum, old)
		if err != nil {
			return err
		}
		if base == nil {
			err = srv.vhosts.add(vh.GetHostname(), &bv.v)
		} else if cur, ok := srv.vhosts.get(vh.GetHostname()); ok && cur.part.listed == b.gen {
			err = fmt.Errorf("hostname %q listed twice", vh.GetHostname()) // this build's own entry
		} else {
			if ok {
				cur.part.claimed = b.gen // replaced: a later virtual host of its name is a duplicate
			}
			err = srv.vhosts.set(vh.GetHostname(), &bv.v)
		}
		if err != nil {
			return fmt.Errorf("virtual host: %w", err)
		}
	}
	if base != nil && taken < len(base.parts) {
		for _, old := range base.parts { // removed: their entries go, unless replaced
			if cur, _ := srv.vhosts.get(old.v.hostname); old.claimed != b.gen && cur == &old.v {
				srv.vhosts.del(old.v.hostname)
			}
		}
	}
	return nil
}

// oldVhost returns base's virtual host of hostname that this build has not taken yet, marking
// it taken: at the place after the previous one's, else by its hostname. nil for none.
func (b *builder) oldVhost(base *server, hostname string) *builtVhost {
	if base == nil {
		return nil
	}
	var old *builtVhost
	if j := b.vpos; j < len(base.parts) && base.parts[j].v.hostname == hostname {
		old = base.parts[j]
	} else if v, ok := base.vhosts.get(hostname); ok && v.hostname == hostname {
		old = v.part
	}
	if old == nil || old.claimed == b.gen {
		return nil
	}
	old.claimed = b.gen
	b.vpos = old.pos + 1
	return old
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
// none), and lists it in srv.
func (b *builder) vhost(srv *server, vh *irv1.VirtualHost, vsum sum, old *builtVhost) (*builtVhost, error) {
	bv := &builtVhost{sum: vsum, claimed: b.gen, listed: b.gen, pos: len(srv.parts)}
	bv.v = vhost{hostname: vh.GetHostname(), routes: make([]*route, 0, len(vh.GetRoutes())), part: bv}
	bv.routes = make([]*builtRoute, 0, len(vh.GetRoutes()))
	bv.refs.Store(1)
	srv.parts = append(srv.parts, bv) // now: a failed build releases it with the table
	b.vh, b.old, b.next = bv, old, 0
	b.routeSums, b.routeN = b.digest.routesOf(b.vhostN-1), 0
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
