package translator

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Attachment (which parentRefs accept a route, on which listeners and hostnames it is placed)
// depends on the route object and the world only, like Build (incremental.go): an Incremental
// records it per route and replays it. What it adds up across routes (listener counts, the
// listeners' routes, precedence) is still done by place, for every route.

// attachRecord is the attachment of one route: its parent statuses, in order, the listeners
// each placed it on, and the problems attachment reported.
type attachRecord struct {
	parents  []*parentRecord
	problems []*Problem
}

type parentRecord struct {
	ref      gwapiv1.ParentReference
	accepted condState
	places   []placeRecord
}

type placeRecord struct {
	listener placeID
	hosts    []string
}

// attachRoute attaches st by each of its parentRefs, from its record when it has one.
func (t *session) attachRoute(st *routeState, r translation.Route) {
	m := st.memo
	if m != nil && m.attach != nil && t.replayAttach(st, m.attach) {
		return
	}
	st.fresh = true
	if m != nil {
		t.attachRec, t.attachNotReplayable = &attachRecord{}, false
	}
	for i, ref := range r.ParentRefs() {
		t.attach(st, i, ref)
	}
	if m != nil {
		if !t.attachNotReplayable {
			m.attach = t.attachRec
		} else {
			st.noKeep = true // keep.go: its record is not its attachment
		}
		t.attachRec = nil
	}
}

// replayAttach attaches st as its record says; false (having done nothing) when a listener of
// the record is not there, which a world that did not change rules out.
func (t *session) replayAttach(st *routeState, rec *attachRecord) bool {
	byID := t.listenersOfPlaces()
	ls := t.attachScratch[:0] // each listener looked up once
	for _, pr := range rec.parents {
		for _, pl := range pr.places {
			var l *listenerState
			if int(pl.listener) < len(byID) {
				l = byID[pl.listener]
			}
			if l == nil {
				return false
			}
			ls = append(ls, l)
		}
	}
	t.attachScratch = ls
	for _, pr := range rec.parents {
		ps := st.newParent(parentStatus{ref: pr.ref, accepted: pr.accepted})
		for _, pl := range pr.places {
			t.place(st, ps, ls[0], pl.hosts)
			ls = ls[1:]
		}
	}
	st.problems = append(st.problems, rec.problems...)
	return true
}
