package translator

import (
	"fmt"
	"sort"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RouteReasonHostnameConflict is the reason of Accepted=False (or, when the route still serves
// other listeners of the same parentRef, Conflicted=True) on an HTTPRoute or GRPCRoute that loses
// a listener to an older route of the other kind with an intersecting hostname.
const RouteReasonHostnameConflict = "HostnameConflict"

// hostnameExclusive are the route kinds Gateway API forbids to share a hostname on one listener:
// an HTTPRoute and a GRPCRoute whose hostnames intersect must not both be accepted there, and
// their rules are never merged.
var hostnameExclusive = map[string]bool{"HTTPRoute": true, "GRPCRoute": true}

// hostnameKindConflicts applies the HTTPRoute/GRPCRoute rule of GRPCRouteSpec.Hostnames to every
// listener: of two routes of those two kinds whose hostnames on the listener intersect, the
// oldest (then "<namespace>/<name>") keeps it; the other leaves the listener and its parentRef
// says why. A route that also conflicts with a route it beat does not count: only winners
// exclude. The loser still counts in attachedRoutes, which the spec bases on parentRefs and
// allowedRoutes alone.
func (t *translation) hostnameKindConflicts() {
	for _, g := range t.gateways {
		for _, l := range g.listeners {
			t.listenerKindConflicts(l)
		}
	}
	for _, st := range t.routes {
		for _, ps := range st.parents {
			t.settleConflicts(st, ps)
		}
	}
}

func (t *translation) listenerKindConflicts(l *listenerState) {
	var cands []*attachment
	kinds := map[string]bool{}
	for _, a := range l.routes {
		if a.route.key.Group == gwapiv1.GroupName && hostnameExclusive[a.route.key.Kind] {
			cands = append(cands, a)
			kinds[a.route.key.Kind] = true
		}
	}
	if len(kinds) < 2 {
		return
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i].route, cands[j].route
		if olderFirst(a.meta, b.meta) != olderFirst(b.meta, a.meta) {
			return olderFirst(a.meta, b.meta)
		}
		return a.key.Kind < b.key.Kind
	})
	var kept []*attachment
	lost := map[*attachment]bool{}
	for _, a := range cands {
		for _, k := range kept {
			if k.route.key.Kind != a.route.key.Kind && hostnamesIntersect(k.hostnames, a.hostnames) {
				lost[a] = true
				a.parent.kindConflicts = append(a.parent.kindConflicts, fmt.Sprintf("%s %s/%s is older and has an intersecting hostname on listener %s/%s",
					k.route.key.Kind, k.route.key.Namespace, k.route.key.Name, l.gw.key, l.spec.Name))
				break
			}
		}
		if !lost[a] {
			kept = append(kept, a)
		}
	}
	if len(lost) == 0 {
		return
	}
	routes := l.routes[:0]
	for _, a := range l.routes {
		if !lost[a] {
			routes = append(routes, a)
		}
	}
	l.routes = routes
}

// settleConflicts turns the listeners a parentRef lost into its status: Accepted=False when it
// lost every listener it was placed on, else a Conflicted condition next to Accepted=True.
func (t *translation) settleConflicts(st *routeState, ps *parentStatus) {
	if len(ps.kindConflicts) == 0 {
		return
	}
	sort.Strings(ps.kindConflicts)
	msg := "HTTPRoutes and GRPCRoutes cannot share a hostname: " + strings.Join(ps.kindConflicts, "; ")
	if len(ps.kindConflicts) >= ps.listeners {
		ps.accepted = condState{reason: RouteReasonHostnameConflict, msg: msg}
		ps.kindConflicts = nil // routeStatus adds a Conflicted condition for what is left
	}
	p := &Problem{Kind: st.key.Kind, Namespace: st.key.Namespace, Name: st.key.Name, Field: "spec.hostnames",
		Reason: RouteReasonHostnameConflict, Message: msg}
	t.problems[p.Error()] = p
}

// hostnamesIntersect reports whether some hostname of a and some of b both accept one name ("" is
// any name).
func hostnamesIntersect(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if _, ok := IntersectHostname(x, y); ok {
				return true
			}
		}
	}
	return false
}
