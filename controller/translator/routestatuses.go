package translator

import (
	"iter"
	"maps"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RouteStatuses are the route statuses of a Result, by route: a read-only map that the Results
// of one Incremental share with one another.
//
// A route change changes one or two of thousands of route statuses, but a Go map shared with
// the previous Result (which the controller and the admin API may still read) had to be cloned
// whole to change them: at 5,000 routes that clone was a tenth of a change's CPU and most of its
// garbage. So a RouteStatuses is two maps: a base that is never modified once a Result holds it,
// and a small overlay of what changed since (a nil status: the route left). The next Result
// copies the overlay only, and folds it into a new base when it grows past a few times the
// square root of the routes: a change then copies O(√n) entries, amortized.
//
// The zero value is empty and ready to read.
type RouteStatuses struct {
	base map[RouteKey]*gwapiv1.RouteStatus
	over map[RouteKey]*gwapiv1.RouteStatus
	n    int
}

// routeStatusesOf takes m (not copied: nothing may modify it after).
func routeStatusesOf(m map[RouteKey]*gwapiv1.RouteStatus) RouteStatuses {
	return RouteStatuses{base: m, n: len(m)}
}

// Get is the status of route k, nil if it has none.
func (r RouteStatuses) Get(k RouteKey) *gwapiv1.RouteStatus {
	st, _ := r.Lookup(k)
	return st
}

// Lookup is the status of route k, and whether it has one.
func (r RouteStatuses) Lookup(k RouteKey) (*gwapiv1.RouteStatus, bool) {
	if st, ok := r.over[k]; ok {
		return st, st != nil
	}
	st, ok := r.base[k]
	return st, ok
}

// Len is the number of routes with a status.
func (r RouteStatuses) Len() int { return r.n }

// All yields every route and its status, in no particular order.
func (r RouteStatuses) All() iter.Seq2[RouteKey, *gwapiv1.RouteStatus] {
	return func(yield func(RouteKey, *gwapiv1.RouteStatus) bool) {
		for k, st := range r.over {
			if st != nil && !yield(k, st) {
				return
			}
		}
		for k, st := range r.base {
			if _, changed := r.over[k]; !changed && !yield(k, st) {
				return
			}
		}
	}
}

// Map is a new map of every route's status.
func (r RouteStatuses) Map() map[RouteKey]*gwapiv1.RouteStatus {
	out := make(map[RouteKey]*gwapiv1.RouteStatus, r.n)
	for k, st := range r.All() {
		out[k] = st
	}
	return out
}

// routeStatusEdit makes the next RouteStatuses from one a Result holds, leaving that one as it
// was.
type routeStatusEdit struct {
	from RouteStatuses
	over map[RouteKey]*gwapiv1.RouteStatus // nil until the first change
	n    int
}

func editRouteStatuses(from RouteStatuses) *routeStatusEdit {
	return &routeStatusEdit{from: from, n: from.n}
}

// set gives route k status st.
func (e *routeStatusEdit) set(k RouteKey, st *gwapiv1.RouteStatus) {
	if _, had := e.lookup(k); !had {
		e.n++
	}
	e.own()[k] = st
}

// remove drops route k's status, if it has one.
func (e *routeStatusEdit) remove(k RouteKey) {
	if _, had := e.lookup(k); !had {
		return
	}
	e.n--
	if _, inBase := e.from.base[k]; inBase {
		e.own()[k] = nil
	} else {
		delete(e.own(), k)
	}
}

// lookup is the status of route k as edited so far (the edit's overlay once it has one).
func (e *routeStatusEdit) lookup(k RouteKey) (*gwapiv1.RouteStatus, bool) {
	if e.over != nil {
		return RouteStatuses{base: e.from.base, over: e.over}.Lookup(k)
	}
	return e.from.Lookup(k)
}

// own is the overlay this edit may modify: a copy of the one it started from.
func (e *routeStatusEdit) own() map[RouteKey]*gwapiv1.RouteStatus {
	if e.over == nil {
		e.over = make(map[RouteKey]*gwapiv1.RouteStatus, len(e.from.over)+4)
		maps.Copy(e.over, e.from.over)
	}
	return e.over
}

// done is the edited RouteStatuses, its overlay folded into a new base when it grew too big.
func (e *routeStatusEdit) done() RouteStatuses {
	if e.over == nil {
		return e.from
	}
	out := RouteStatuses{base: e.from.base, over: e.over, n: e.n}
	if len(e.over) > foldAt(len(e.from.base)) {
		out = routeStatusesOf(out.Map())
	}
	return out
}

// foldAt is the size of overlay beyond which it is folded into the base of n routes: copying
// the overlay at every change and the base at every fold then cost about the same, O(√n)
// entries per change.
func foldAt(n int) int {
	r := 16
	for r*r < 4*n {
		r++
	}
	return r
}
