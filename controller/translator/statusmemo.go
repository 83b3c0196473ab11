package translator

import (
	"slices"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// statusRecord is the status an Incremental computed for a route, with what it was computed
// from beyond the route's own records: a route whose Build calls and attachment were all
// replayed (routeState.fresh unset) reads the same records as then, so its status differs only
// if what other routes did to it (shadowing, HostnameConflict, which may also turn Accepted
// False) did. Then the status is the same object as before: at
// thousands of routes, building every route's conditions again was a twentieth of a route
// change's CPU, and the garbage it left more. The writer only reads statuses, so two Results
// may share one.
//
// The time a condition carries (lastTransitionTime) is the translation's, truncated to the
// second. A reused status keeps the time it was computed at, across seconds: its conditions did
// not change since, so that is when they last transitioned as far as this controller knows, and
// the status writer compares statuses without lastTransitionTime and, writing, keeps the live
// condition's time whenever the condition's status did not change (status.mergeConditions). So
// a full translation of the same Store gives the same statuses but for the time of the reused
// ones' conditions, which is earlier; TestIncrementalEqualsTranslate compares route statuses so
// (and checks no time is later than the translation's). Reusing only within a second made every
// route's status new again at every change that came a second after the previous one: the
// common case of a controller, and at thousands of routes the writer's comparison of every
// route's status too.
type statusRecord struct {
	gen     int64
	parents []parentOutcome
	rs      *gwapiv1.RouteStatus
	// seq is the translation (statusHandOver.seq) whose Result rs was put into last.
	seq uint64
}

// parentOutcome is what other routes decided about one parentRef.
type parentOutcome struct {
	accepted      condState
	shadowed      []string
	kindConflicts []kindConflict
}

// routeStatusOf is routeStatus(st), reusing st's previous status when it still holds. same says
// it is the status the previous translation put into its Result for st's record
// (statuschanges.go).
func (t *session) routeStatusOf(st *routeState) (rs *gwapiv1.RouteStatus, same bool) {
	m := st.memo
	if m == nil {
		return t.routeStatus(st), false
	}
	if r := m.status; r != nil && !st.fresh && r.holds(st) {
		t.memo.statuses++
		same = r.seq != 0 && r.seq+1 == t.statusSeq
		r.seq = t.statusSeq
		return r.rs, same
	}
	rs = t.routeStatus(st)
	r := m.status
	if r == nil {
		r = &statusRecord{}
		m.status = r
	}
	// Overwritten in place: the previous status is not shared with anything that reads the
	// record, and a route whose status is rebuilt every second should not allocate twice.
	r.gen, r.rs, r.parents, r.seq = st.meta.GetGeneration(), rs, r.parents[:0], t.statusSeq
	for _, ps := range st.parents {
		r.parents = append(r.parents, parentOutcome{accepted: ps.accepted, shadowed: slices.Clone(ps.shadowed),
			kindConflicts: slices.Clone(ps.kindConflicts)})
	}
	return rs, false
}

func (r *statusRecord) holds(st *routeState) bool {
	if r.gen != st.meta.GetGeneration() || len(r.parents) != len(st.parents) {
		return false
	}
	for i, ps := range st.parents {
		p := &r.parents[i]
		if p.accepted != ps.accepted || !slices.Equal(p.shadowed, ps.shadowed) || !slices.Equal(p.kindConflicts, ps.kindConflicts) {
			return false
		}
	}
	return true
}
