package translator

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// hostnameKindConflicts applies translation.HostnameExclusiveKind (GRPCRouteSpec.Hostnames:
// HTTPRoutes and GRPCRoutes) to every listener: of two routes of an exclusive pair of kinds whose
// hostnames on the listener intersect, the oldest (then "<namespace>/<name>") keeps it; the other
// leaves the listener and its parentRef says why. A route that also conflicts with a route it
// beat does not count: only winners exclude. The loser still counts in attachedRoutes, which the
// spec bases on parentRefs and allowedRoutes alone.
func (t *session) hostnameKindConflicts() {
	pairs := t.exclusivePairs()
	if len(pairs) == 0 {
		return
	}
	for _, g := range t.gateways {
		for _, l := range g.listeners {
			t.listenerKindConflicts(l, pairs)
		}
	}
	// Only the parentRefs that lost a listener, not every route's: at thousands of routes the
	// visit of every parent status was most of this pass.
	for _, c := range t.conflicted {
		t.settleConflicts(c.route, c.parent)
	}
}

// conflictedParent is a parentRef that lost a listener to an older route of another kind.
type conflictedParent struct {
	route  *routeState
	parent *parentStatus
}

// kindPair is two route kinds that must not share a listener hostname, in a fixed order.
type kindPair struct{ a, b schema.GroupKind }

func orderedPair(x, y schema.GroupKind) kindPair {
	if y.Group < x.Group || (y.Group == x.Group && y.Kind < x.Kind) {
		x, y = y, x
	}
	return kindPair{x, y}
}

// exclusivePairs collects the pairs the registered route kinds declare, each both ways round.
func (t *session) exclusivePairs() map[kindPair]bool {
	pairs := map[kindPair]bool{}
	for _, k := range t.kinds {
		if hk, ok := k.(translation.HostnameExclusiveKind); ok {
			for _, other := range hk.HostnameExclusiveWith() {
				pairs[orderedPair(k.API().GVK.GroupKind(), other)] = true
			}
		}
	}
	return pairs
}

func routeGroupKind(st *routeState) schema.GroupKind {
	return schema.GroupKind{Group: st.key.Group, Kind: st.key.Kind}
}

func (t *session) listenerKindConflicts(l *listenerState, pairs map[kindPair]bool) {
	// Only a listener holding routes of both kinds of a pair can have a conflict; most hold one
	// kind, and are done here without comparing their routes.
	// Routes of one kind come in runs (translateRoutes goes kind by kind): only a change of kind
	// is hashed into the map.
	present := map[schema.GroupKind]bool{}
	if l.kept != nil {
		for gk := range l.kept.kinds { // keep.go counts them
			present[gk] = true
		}
	} else {
		var last *routeState
		for _, a := range l.routes {
			if last == nil || a.route.key.Kind != last.key.Kind || a.route.key.Group != last.key.Group {
				present[routeGroupKind(a.route)] = true
				last = a.route
			}
		}
	}
	if len(present) < 2 {
		// A pair needs two kinds, unless a kind is exclusive with itself.
		for gk := range present {
			if !pairs[kindPair{gk, gk}] {
				return
			}
		}
		if len(present) == 0 {
			return
		}
	}
	var cands []*attachment
	for _, a := range l.routes {
		gk := routeGroupKind(a.route)
		for p := range pairs {
			if (gk == p.a && present[p.b]) || (gk == p.b && present[p.a]) {
				cands = append(cands, a)
				break
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i].route, cands[j].route
		if olderFirst(a.meta, b.meta) != olderFirst(b.meta, a.meta) {
			return olderFirst(a.meta, b.meta)
		}
		return a.key.Kind < b.key.Kind
	})
	// kept holds the winners so far by kind: a route is compared only with older routes of the
	// kinds it is exclusive with, never with its own kind.
	kept := map[schema.GroupKind][]*attachment{}
	var keptKinds []schema.GroupKind // kept's keys in the order they first won: deterministic
	lost := map[*attachment]bool{}
	for _, a := range cands {
		gk := routeGroupKind(a.route)
		for _, other := range keptKinds {
			if !pairs[orderedPair(gk, other)] {
				continue
			}
			for _, k := range kept[other] {
				if hostnamesIntersect(k.hostnames, a.hostnames) {
					lost[a] = true
					if len(a.parent.kindConflicts) == 0 {
						t.conflicted = append(t.conflicted, conflictedParent{a.route, a.parent})
					}
					a.parent.kindConflicts = append(a.parent.kindConflicts, kindConflict{
						with: other,
						msg: fmt.Sprintf("%s %s/%s is older and has an intersecting hostname on listener %s/%s",
							k.route.key.Kind, k.route.key.Namespace, k.route.key.Name, l.gw.key, l.spec.Name),
					})
					break
				}
			}
			if lost[a] {
				break
			}
		}
		if !lost[a] {
			if len(kept[gk]) == 0 {
				keptKinds = append(keptKinds, gk)
			}
			kept[gk] = append(kept[gk], a)
		}
	}
	if len(lost) == 0 {
		return
	}
	l.crossRoute = true
	routes := make([]*attachment, 0, len(l.routes)-len(lost)) // l.routes may be a kept list (keep.go)
	for _, a := range l.routes {
		if !lost[a] {
			routes = append(routes, a)
		}
	}
	l.routes, l.kept = routes, nil
}

// kindConflict is a listener a parentRef lost to an older route of an exclusive kind.
type kindConflict struct {
	with schema.GroupKind
	msg  string
}

// settleConflicts turns the listeners a parentRef lost into its status: Accepted=False when it
// lost every listener it was placed on, else a Conflicted condition next to Accepted=True.
func (t *session) settleConflicts(st *routeState, ps *parentStatus) {
	if len(ps.kindConflicts) == 0 {
		return
	}
	msg := kindConflictMessage(st, ps.kindConflicts)
	if len(ps.kindConflicts) >= ps.listeners {
		ps.accepted = condState{reason: translation.RouteReasonHostnameConflict, msg: msg}
		ps.kindConflicts = nil // routeStatus adds a Conflicted condition for what is left
	}
	p := &Problem{Kind: st.key.Kind, Namespace: st.key.Namespace, Name: st.key.Name, Field: "spec.hostnames",
		Reason: translation.RouteReasonHostnameConflict, Message: msg}
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

// kindConflictMessage says which kinds cannot share a hostname (HTTPRoutes and GRPCRoutes) and
// every listener lost, sorted.
func kindConflictMessage(st *routeState, cs []kindConflict) string {
	kinds := []string{cs[0].with.Kind + "s", st.key.Kind + "s"}
	sort.Sort(sort.Reverse(sort.StringSlice(kinds)))
	return kinds[0] + " and " + kinds[1] + " cannot share a hostname: " + conflictList(cs)
}

// conflictList joins the conflicts' messages, sorted.
func conflictList(cs []kindConflict) string {
	msgs := make([]string, len(cs))
	for i, c := range cs {
		msgs[i] = c.msg
	}
	sort.Strings(msgs)
	return strings.Join(msgs, "; ")
}
