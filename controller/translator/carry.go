package translator

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Carrying a route's state over. A route whose previous translation replayed all of it (its
// validation, hostnames, attachment and listener builds: routeState.fresh unset) and whose object
// is the same is, in a world that did not change, translated again into exactly the same
// routeState: the same rule problems and warnings, parent statuses, listeners and attachments.
// So an Incremental takes that routeState over instead of making a new one and replaying the
// records into it: at thousands of routes, allocating and filling a routeState, its parent
// statuses and attachments for every route was most of what an incremental translation
// allocated, and the garbage collection that followed a quarter of its CPU.
//
// What is not the route's own is reset or redone: what passes over several routes wrote into its
// parent statuses (shadowing, HostnameConflict: the accepted condition comes back from the
// attachment record), the listeners (this translation's objects, found by placeID) and their
// attachment lists and counts, and what the route's builds add to the session (clusters, filter
// clusters, unresolved ExtensionRefs), replayed from the records. A route of an implicit kind
// (Ingress) is never carried: yielding to Gateway API routes changes its warnings and its
// attachments' hostnames. TestIncrementalEqualsTranslate holds carried states to a full
// translation like everything else.

// carried returns rm's routeState of the previous translation when it can be taken over for
// route r of kind k (of API group and kind gk), else nil.
func (t *session) carried(k translation.RouteKind, gk schema.GroupKind, r translation.Route) *routeState {
	obj := r.Object()
	p := ifacePointer(obj)
	rm := t.memo.byPtr[p]
	if rm == nil || rm.seen == t.memo.epoch || rm.cur == nil || !t.current(rm) || rm.dupEpoch == rm.curEpoch ||
		ifacePointer(rm.obj) != p || rm.obj.GetResourceVersion() != obj.GetResourceVersion() {
		return nil
	}
	st := rm.cur
	if st.fresh || st.key.Kind != gk.Kind || st.key.Group != gk.Group || rm.attach == nil || rm.validate == nil {
		return nil
	}
	if _, implicit := k.(translation.ImplicitParentKind); implicit {
		return nil
	}
	if !t.placesHold(st) {
		return nil
	}
	t.memo.see(rm)
	t.memo.carried++
	return st
}

// current says rm's state is the route's state of the previous translation: one it made or
// carried, or one it kept without a visit (keep.go).
func (t *session) current(rm *routeMemo) bool {
	return rm.curEpoch+1 == t.memo.epoch || (t.keptCurrent && rm.cur.kept)
}

// placesHold says the listeners st was placed on are there in this translation, and each that
// is programmed has its build recorded.
func (t *session) placesHold(st *routeState) bool {
	byID := t.listenersOfPlaces()
	for _, l := range st.placedOn {
		if !l.pidSet || int(l.pid) >= len(byID) || byID[l.pid] == nil {
			return false
		}
		if cur := byID[l.pid]; cur.programmed() && st.memo.placeRecordOf(l.pid) == nil {
			return false
		}
	}
	return true
}

// carry redoes for a carried route what is not its own (above), in the order of the routes, as
// attachRoute would.
func (t *session) carry(st *routeState) {
	rm := st.memo
	byID := t.listenersOfPlaces()
	i := 0
	for _, pr := range rm.attach.parents {
		ps := st.parents[i]
		i++
		ps.accepted, ps.shadowed, ps.kindConflicts = pr.accepted, nil, nil
	}
	t.memo.reused++
	t.replaySession(rm.validate)
	for j, old := range st.placedOn {
		l := byID[old.pid]
		st.placedOn[j] = l
		l.attached++
		t.appendRoute(l, st.attachments[j])
		if l.programmed() {
			t.memo.reused++
			t.replaySession(rm.placeRecordOf(l.pid))
		}
	}
}

// listenersOfPlaces indexes this translation's listeners by placeID.
func (t *session) listenersOfPlaces() []*listenerState {
	if t.listenersByID == nil {
		t.listenersByID = make([]*listenerState, 0, len(t.memo.places))
		for _, g := range t.gateways {
			for _, l := range g.listeners {
				id := int(t.placeIDOf(l))
				for len(t.listenersByID) <= id {
					t.listenersByID = append(t.listenersByID, nil)
				}
				t.listenersByID[id] = l
			}
		}
	}
	return t.listenersByID
}

// appendRoute appends a to l's routes, which the first time get the capacity of the previous
// translation's list: growing them by doubling was a tenth of a route change's allocations.
func (t *session) appendRoute(l *listenerState, a *attachment) {
	if t.keeping {
		return // the kept lists take it (keep.go)
	}
	if l.routes == nil && l.pidSet && int(l.pid) < len(t.routesHint) {
		l.routes = make([]*attachment, 0, t.routesHint[l.pid]+1)
	}
	l.routes = append(l.routes, a)
}
