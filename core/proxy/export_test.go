package proxy

import (
	"fmt"
	"sort"
	"strings"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// TableOf identifies the table serving now, so that tests can tell an in-place endpoint update
// (the same table) from a rebuild.
func TableOf(p *Proxy) any { return p.cur.Load() }

// StdlibPathOnly makes the current table's HTTP/1.1 clusters forward through the stdlib reverse
// proxy (their fast path finds no connection pool, as for a pick from a retired endpoint set),
// so that tests reach that path with any request.
func StdlibPathOnly(p *Proxy) {
	for _, cl := range p.cur.Load().clusters {
		s := *cl.set.Load()
		s.h1p0, s.h1 = nil, nil
		cl.set.Store(&s)
	}
}

// SetFullBuilds turns sharing with the serving table off (true) or on, so that tests and
// benchmarks can compare incremental builds with full ones.
func SetFullBuilds(p *Proxy, full bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fullBuilds = full
}

// RouteOf is the compiled route named name in the serving table (the first, if several), nil for
// none: tests compare it across applies to tell a shared route from a recompiled one.
func RouteOf(p *Proxy, name string) any {
	for _, br := range routesOf(p.cur.Load()) {
		if br.rt.name == name {
			return br.rt
		}
	}
	return nil
}

// routesOf lists t's compiled routes in build order.
func routesOf(t *table) []*builtRoute {
	var out []*builtRoute
	for _, srv := range t.servers {
		for _, run := range srv.runs {
			for _, bv := range run.parts {
				out = append(out, bv.routes...)
			}
		}
	}
	return out
}

// MatcherOf is the match module instance of RouteOf(p, name).
func MatcherOf(p *Proxy, name string) any {
	for _, br := range routesOf(p.cur.Load()) {
		if br.rt.name == name {
			return br.rt.matcher
		}
	}
	return nil
}

// ClusterOf is the serving table's cluster named name, nil for none.
func ClusterOf(p *Proxy, name string) any {
	if cl, ok := p.cur.Load().byName[name]; ok {
		return cl
	}
	return nil
}

// DescribeTable renders what the serving table serves, independently of how it was built: every
// listener, server, virtual host and route (with the sum of the IR it was compiled from and the
// clusters its upstreams point at, each checked to be the table's own), every cluster with its
// head, endpoints and balancer, and the table-wide sets. An incremental build and a full build of
// the same snapshot must describe the same.
func DescribeTable(p *Proxy) string {
	t := p.cur.Load()
	if t == nil {
		return "no table"
	}
	var b strings.Builder
	own := map[*cluster]bool{}
	for _, cl := range t.clusters {
		own[cl] = true
		fmt.Fprintf(&b, "cluster %s head=%x balancer=%T live=%t sticky=%t breaker=%v tls=%t\n", cl.name, cl.head[:6],
			cl.balancer, cl.live, cl.sticky != nil, cl.breaker, cl.conn.tls != nil)
		for _, ep := range cl.set.Load().eps {
			fmt.Fprintf(&b, "  endpoint %s weight=%d\n", ep.HostPort, ep.Weight)
		}
		fmt.Fprintf(&b, "  breaker sets %d\n", len(t.breakers[cl]))
	}
	byRoute := map[*route]*builtRoute{}
	for _, br := range routesOf(t) {
		byRoute[br.rt] = br
	}
	for _, bl := range t.listeners {
		fmt.Fprintf(&b, "listener %s %s\n", bl.ir.GetName(), bl.module)
		var servers []*server
		bl.state.servers.each(func(s *server) { servers = append(servers, s) })
		sort.Slice(servers, func(i, j int) bool { return servers[i].hostname < servers[j].hostname })
		for _, s := range servers {
			fmt.Fprintf(&b, " server %q tls=%t filters=%t\n", s.hostname, s.tls != nil, s.listenerFilters != nil)
			var vhs []*vhost
			s.vhosts.each(func(v *vhost) { vhs = append(vhs, v) })
			sort.Slice(vhs, func(i, j int) bool { return vhs[i].hostname < vhs[j].hostname })
			for _, v := range vhs {
				fmt.Fprintf(&b, "  vhost %q\n", v.hostname)
				for _, rt := range v.routes {
					br := byRoute[rt]
					if br == nil {
						fmt.Fprintf(&b, "   route %s NOT INDEXED\n", rt.name)
						continue
					}
					fmt.Fprintf(&b, "   route %s sum=%x gateway=%q matcher=%T timeout=%s\n", rt.name, br.key.sum[:6], br.key.gateway, rt.matcher, rt.timeout)
					for _, cl := range br.deps {
						state := "own"
						if !own[cl] {
							state = "STALE"
						}
						fmt.Fprintf(&b, "    cluster %s %s\n", cl.name, state)
					}
				}
			}
		}
	}
	fmt.Fprintf(&b, "noRoute %v\n", t.noRouteIDs)
	fmt.Fprintf(&b, "tlsKeys %d certKeys %d routes %d\n", len(t.tlsKeys), len(t.certKeys), len(routesOf(t)))
	return b.String()
}

// RunLengths is how the shape pass cuts the virtual hosts of snap's first server into runs
// (shape.go): the number of virtual hosts of each run, in order.
func RunLengths(snap *irv1.Snapshot) []int {
	var out []int
	for _, r := range digestOf(snap).servers[0] {
		out = append(out, len(r.vhs))
	}
	return out
}
