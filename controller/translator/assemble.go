package translator

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

type irListenerKey struct {
	address  string
	port     uint32
	protocol string
}

type serverBuild struct {
	server *irv1.Server
	// listeners are those merged into the server, in order; their attachments are gathered
	// into virtual hosts by finishServer.
	listeners []*listenerState
}

// placed is one entry in a virtual host, with what precedence tie-breaking needs.
type placed struct {
	entry  *translation.Entry
	route  *routeState
	parent *parentStatus
	// origin is the route's own hostname that yields this virtual host (intersection.go).
	origin string
}

// snapshot assembles the IR from the programmed listeners and their attachments.
func (t *session) snapshot() *irv1.Snapshot {
	listeners := map[irListenerKey]map[string]*serverBuild{}
	members := map[irListenerKey][]*listenerState{}
	snap := &irv1.Snapshot{}
	for _, g := range t.gateways {
		if g.rejectReason != "" || !g.anyProgrammed() {
			continue
		}
		snap.Gateways = append(snap.Gateways, &irv1.GatewayGeneration{
			Namespace: g.key.Namespace, Name: g.key.Name, Generation: g.gw.Generation,
		})
		snap.Gateways = append(snap.Gateways, t.listenerSetGenerations(g)...)
		for _, l := range g.listeners {
			if !l.bound() {
				continue
			}
			for _, addr := range g.addresses {
				k := irListenerKey{addr, t.bindPort(l), string(l.spec.Protocol)}
				if listeners[k] == nil {
					listeners[k] = map[string]*serverBuild{}
				}
				t.addToServer(listeners[k], l)
				members[k] = append(members[k], l)
			}
		}
	}
	used := map[string]bool{}
	clusterNames := map[string]bool{}
	for n := range t.filterClusters {
		clusterNames[n] = true
	}
	last := ""
	useCluster := func(name string) {
		if name != last { // consecutive virtual hosts mostly name the same ones
			clusterNames[name], last = true, name
		}
	}
	for k, servers := range listeners {
		il := &irv1.Listener{
			Name:    net.JoinHostPort(k.address, strconv.Itoa(int(k.port))) + "/" + k.protocol,
			Address: k.address, Port: k.port, Protocol: k.protocol,
		}
		for _, sb := range servers {
			il.Servers = append(il.Servers, t.finishServer(il.Name, sb, used, useCluster))
		}
		sort.Slice(il.Servers, func(i, j int) bool { return hostnameLess(il.Servers[i].Hostname, il.Servers[j].Hostname) })
		t.socketSettings(il, members[k])
		snap.Listeners = append(snap.Listeners, il)
	}
	t.http3Conflicts(snap.Listeners, members)
	sort.Slice(snap.Listeners, func(i, j int) bool {
		a, b := snap.Listeners[i], snap.Listeners[j]
		if a.Address != b.Address {
			return a.Address < b.Address
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return a.Protocol < b.Protocol
	})
	snap.Clusters = t.usedClusters(clusterNames)
	for _, c := range snap.Clusters {
		if name := c.GetTls().GetClientCertificate(); name != "" {
			used[name] = true // the client certificate a Gateway presents to TLS backends
		}
	}
	for name := range used {
		snap.Secrets = append(snap.Secrets, t.secretsOut[name])
	}
	sort.Slice(snap.Secrets, func(i, j int) bool { return snap.Secrets[i].Name < snap.Secrets[j].Name })
	snap.AcmeChallenges = t.acmeChallenges()
	return snap
}

func (g *gatewayState) anyProgrammed() bool {
	for _, l := range g.listeners {
		if l.bound() {
			return true
		}
	}
	return false
}

// addToServer merges listener l into the server for its hostname (listeners of several Gateways
// with one hostname share it; crossGatewayConflicts made sure their TLS agrees).
func (t *session) addToServer(servers map[string]*serverBuild, l *listenerState) {
	sb := servers[l.hostname]
	if sb == nil {
		sb = &serverBuild{server: &irv1.Server{Hostname: l.hostname, Filters: l.filters}}
		switch {
		case l.passthrough:
			sb.server.Tls = &irv1.TLS{Mode: irv1.TLS_PASSTHROUGH}
		case len(l.certs) > 0 || l.acme != nil: // an ACME listener may have none yet
			sb.server.Tls = &irv1.TLS{Mode: irv1.TLS_TERMINATE, Certificates: slices.Clone(l.certs),
				ClientValidation: t.serverClientValidation(l)}
		}
		servers[l.hostname] = sb
	}
	for _, src := range l.sources() {
		if !slices.Contains(sb.server.Sources, src) {
			sb.server.Sources = append(sb.server.Sources, src)
		}
	}
	sb.listeners = append(sb.listeners, l)
}

// gather collects the placed entries of the server's listeners by virtual host, for the
// hostnames b gathers (all of them but for an Incremental's unchanged ones, vhosts.go). The
// entries are values: at thousands of routes one allocation per entry was a sixth of an
// incremental translation's.
func gather(sb *serverBuild, b *serverBuilder) map[string][]placed {
	if vhosts, ok := gatherKept(sb, b); ok {
		return vhosts
	}
	vhosts := map[string][]placed{}
	for _, l := range sb.listeners {
		for _, a := range l.routes {
			for _, h := range a.hostnames {
				if !b.gathers(h) {
					continue
				}
				origin := hostnameOrigin(l.hostname, a.route.hostnames, h)
				for _, e := range a.entries {
					vhosts[h] = append(vhosts[h], placed{entry: e, route: a.route, parent: a.parent, origin: origin})
				}
			}
		}
	}
	return vhosts
}

// gatherKept is gather from the listeners' kept lists by hostname (keep.go), when b gathers a
// few hostnames and every listener has its kept list: the attachments of the hostnames gathered,
// in the order gather finds them, without a visit of every attachment.
func gatherKept(sb *serverBuild, b *serverBuilder) (map[string][]placed, bool) {
	if b.dirty == nil {
		return nil, false
	}
	for _, l := range sb.listeners {
		if l.kept == nil {
			return nil, false
		}
	}
	vhosts := map[string][]placed{}
	for _, l := range sb.listeners {
		for h := range b.dirty {
			for _, a := range l.kept.byHost[h] {
				origin := hostnameOrigin(l.hostname, a.route.hostnames, h)
				for _, e := range a.entries {
					vhosts[h] = append(vhosts[h], placed{entry: e, route: a.route, parent: a.parent, origin: origin})
				}
			}
		}
	}
	return vhosts, true
}

func (t *session) finishServer(listener string, sb *serverBuild, usedSecrets map[string]bool, useCluster func(string)) *irv1.Server {
	s := sb.server
	sort.Strings(s.Sources)
	if s.Tls != nil {
		for _, c := range s.Tls.Certificates {
			usedSecrets[c] = true
		}
	}
	var epoch uint64
	if t.memo != nil {
		epoch = t.memo.epoch
	}
	var dirty map[string]bool
	if t.delta != nil && t.delta.allKinds {
		dirty = t.delta.dirtyHostnames()
	}
	b := t.vhosts.server(serverKey{listener: listener, server: s.Hostname}, sb.listeners, epoch, dirty)
	gathered := gather(sb, b)
	vhs := make([]*irv1.VirtualHost, 0, len(gathered))
	for h, ps := range gathered {
		if vh := b.reuse(h, ps); vh != nil {
			vhs = append(vhs, vh)
			continue
		}
		in := slices.Clone(ps) // the order placed in, which the record is compared by
		sortPlaced(ps)
		vh := &irv1.VirtualHost{Hostname: h}
		seen := map[string]bool{}
		var shadows []vhostShadow
		var winner *routeState // of an ExclusiveKind: the one route that serves this virtual host
		for i := range ps {
			p := &ps[i]
			if isExclusive(p.route.kind) {
				if winner == nil {
					winner = p.route
				} else if p.route != winner {
					msg := shadowMessage(h, winner)
					p.parent.shadow(msg)
					b.m.touch(p.route)
					shadows = append(shadows, vhostShadow{placed: slices.Index(in, *p), parent: slices.Index(p.route.parents, p.parent), msg: msg})
					continue
				}
			}
			if seen[p.entry.Route.Name] {
				continue // the same route reached this server through two merged listeners
			}
			seen[p.entry.Route.Name] = true
			vh.Routes = append(vh.Routes, p.entry.Route)
		}
		b.record(h, in, vh, shadows)
		vhs = append(vhs, vh)
	}
	b.keepClean(gathered)
	s.VirtualHosts = b.finish(vhs, useCluster)
	return s
}

// sortPlaced orders the entries of one virtual host: the route's own hostname (more specific
// first, intersection.go), then Precedence (larger first, element-wise), then the oldest route, then "<namespace>/<name>", then rule index, then match index. Kind
// breaks the last ties so the order is total across route kinds.
func sortPlaced(ps []placed) {
	if len(ps) < 2 {
		return
	}
	slices.SortStableFunc(ps, func(a, b placed) int {
		switch {
		case placedLess(&a, &b):
			return -1
		case placedLess(&b, &a):
			return 1
		}
		return 0
	})
}

func placedLess(a, b *placed) bool {
	if c := compareOrigin(a.origin, b.origin); c != 0 {
		return c > 0
	}
	if c := comparePrecedence(a.entry.Precedence, b.entry.Precedence); c != 0 {
		return c > 0
	}
	if a.route != b.route {
		ma, mb := a.route.meta, b.route.meta
		ta, tb := ma.GetCreationTimestamp(), mb.GetCreationTimestamp()
		if !ta.Equal(&tb) {
			return ta.Before(&tb)
		}
		if ka, kb := ma.GetNamespace()+"/"+ma.GetName(), mb.GetNamespace()+"/"+mb.GetName(); ka != kb {
			return ka < kb
		}
		if a.route.key.Kind != b.route.key.Kind {
			return a.route.key.Kind < b.route.key.Kind
		}
	}
	if a.entry.Rule != b.entry.Rule {
		return a.entry.Rule < b.entry.Rule
	}
	return a.entry.Match < b.entry.Match
}

// comparePrecedence compares element-wise; a missing element counts as 0.
func comparePrecedence(a, b []int) int {
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x > y {
				return 1
			}
			return -1
		}
	}
	return 0
}

// usedClusters returns the named clusters, sorted by name.
func (t *session) usedClusters(names map[string]bool) []*irv1.Cluster {
	out := make([]*irv1.Cluster, 0, len(names))
	for n := range names {
		out = append(out, t.clusters[n])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func isExclusive(k translation.RouteKind) bool {
	ek, ok := k.(translation.ExclusiveKind)
	return ok && ek.Exclusive()
}

func shadowMessage(host string, winner *routeState) string {
	where := "its listener"
	if host != "" {
		where = fmt.Sprintf("hostname %q", host)
	}
	return fmt.Sprintf("%s %s/%s is older and serves %s", winner.key.Kind, winner.key.Namespace, winner.key.Name, where)
}
