package translator

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// statusRecord is the status an Incremental computed for a route, with what it was computed
// from beyond the route's own records: a route whose Build calls and attachment were all
// replayed (routeState.fresh unset) reads the same records as then, so its status differs only
// if what other routes did to it (shadowing, HostnameConflict, which may also turn Accepted
// False) or the translation's time did. Then the status is the same object as before: at
// thousands of routes, building every route's conditions again was a twentieth of a route
// change's CPU, and the garbage it left more. The writer only reads statuses, so two Results
// may share one.
//
// The time stamps every condition's lastTransitionTime, and a translation's time is truncated
// to the second: a status is reused only by translations within the second it was computed in
// (bursts of changes), never across seconds, so that a full translation gives the same.
type statusRecord struct {
	now     metav1.Time
	gen     int64
	parents []parentOutcome
	rs      *gwapiv1.RouteStatus
}

// parentOutcome is what other routes decided about one parentRef.
type parentOutcome struct {
	accepted      condState
	shadowed      []string
	kindConflicts []kindConflict
}

// routeStatusOf is routeStatus(st), reusing st's previous status when it still holds.
func (t *session) routeStatusOf(st *routeState) *gwapiv1.RouteStatus {
	m := st.memo
	if m == nil {
		return t.routeStatus(st)
	}
	if r := m.status; r != nil && !st.fresh && r.holds(st, t.now) {
		t.memo.statuses++
		return r.rs
	}
	rs := t.routeStatus(st)
	r := m.status
	if r == nil {
		r = &statusRecord{}
		m.status = r
	}
	// Overwritten in place: the previous status is not shared with anything that reads the
	// record, and a route whose status is rebuilt every second should not allocate twice.
	r.now, r.gen, r.rs, r.parents = t.now, st.meta.GetGeneration(), rs, r.parents[:0]
	for _, ps := range st.parents {
		r.parents = append(r.parents, parentOutcome{accepted: ps.accepted, shadowed: slices.Clone(ps.shadowed),
			kindConflicts: slices.Clone(ps.kindConflicts)})
	}
	return rs
}

func (r *statusRecord) holds(st *routeState, now metav1.Time) bool {
	if !r.now.Equal(&now) || r.gen != st.meta.GetGeneration() || len(r.parents) != len(st.parents) {
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
