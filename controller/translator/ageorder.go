package translator

import (
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ageOrder keeps, for an Incremental, each route kind's routes in age order (olderFirst) from
// one translation to the next, so that a translation sorts only the routes that are new since
// the previous one and merges them into the order it kept: sorting 5,000 routes by creation
// time and name every time was a twentieth of a route change's CPU. A route's place is its
// record's rank in the previous order: a record holds for one object, or for objects of one
// UID and generation (sameObject), and so for one creation time and name, and ranks are taken
// over without comparing anything.
//
// The new routes are sorted (stably, in the Store's order, as Translate sorts) and merged in,
// and every pair a merge puts side by side is checked to be strictly in order. When one is not
// (two objects of one name in a Store), all the routes are sorted afresh from the Store's order,
// as Translate does. A nil *ageOrder (Translate) always sorts.
type ageOrder struct {
	// n is the number of routes of each kind the previous translation ranked.
	n map[schema.GroupKind]int
}

// sort orders sts, the routes of kind gk in the Store's order, oldest first; epoch is the
// translation's (memoIndex.epoch). It says whether it merged into the kept order.
func (o *ageOrder) sort(gk schema.GroupKind, sts []*routeState, epoch uint64) (merged bool) {
	if o == nil {
		sortByAge(sts)
		return false
	}
	if o.n == nil {
		o.n = map[schema.GroupKind]int{}
	}
	if merged = o.merge(o.n[gk], sts, epoch); !merged {
		sortByAge(sts)
	}
	for i, st := range sts {
		if st.memo != nil {
			st.memo.rank, st.memo.rankEpoch = i, epoch
		}
	}
	o.n[gk] = len(sts)
	return merged
}

// merge puts sts in age order from the previous ranks; false, leaving sts as it was, when a
// pair of the result is not strictly in order.
func (o *ageOrder) merge(prevN int, sts []*routeState, epoch uint64) bool {
	if prevN == 0 {
		return false
	}
	slots := make([]*routeState, prevN)
	var added []*routeState
	for _, st := range sts {
		if m := st.memo; m != nil && m.rankEpoch != 0 && m.rankEpoch == epoch-1 && m.rank < prevN && slots[m.rank] == nil {
			slots[m.rank] = st
		} else {
			added = append(added, st)
		}
	}
	sortByAge(added)
	kept := slots[:0] // the kept routes in their order, which is age order
	for _, st := range slots {
		if st != nil {
			kept = append(kept, st)
		}
	}
	out := make([]*routeState, 0, len(sts))
	i := 0
	for _, a := range added {
		// Its place among the kept routes: found by bisection, since comparing a new route with
		// every older kept one was a twentieth of a route change's CPU at thousands of routes.
		j := i + sort.Search(len(kept)-i, func(k int) bool { return !olderFirst(kept[i+k].meta, a.meta) })
		out = append(out, kept[i:j]...)
		i = j
		if len(out) > 0 && !olderFirst(out[len(out)-1].meta, a.meta) {
			return false
		}
		out = append(out, a)
		// The kept route that follows must be younger too.
		if i < len(kept) && !olderFirst(a.meta, kept[i].meta) {
			return false
		}
	}
	out = append(out, kept[i:]...)
	copy(sts, out)
	return true
}

func sortByAge(sts []*routeState) {
	slices.SortStableFunc(sts, func(a, b *routeState) int {
		switch {
		case olderFirst(a.meta, b.meta):
			return -1
		case olderFirst(b.meta, a.meta):
			return 1
		}
		return 0
	})
}
