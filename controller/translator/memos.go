package translator

import "unsafe"

// memoIndex holds an Incremental's route records across translations. Looking a record up by
// route name hashes four strings, which at 5,000 routes was a tenth of an incremental
// translation; so the records are found first by the address of the route object they were made
// from (an informer replaces an object that changes and never modifies one in place, and the
// records keep their objects referenced, so no other object can take that address), and by
// name only when the object is a new one. Both indexes persist from one translation to the
// next; sweep drops the records a translation did not use.
type memoIndex struct {
	byID  map[routeID]*routeMemo
	byPtr map[unsafe.Pointer]*routeMemo
	// places numbers the listeners the records name (placeID).
	places map[placeKey]placeID
	// epoch counts translations: a record used by this one has seen == epoch; live counts the
	// records this one used, so that sweep can tell when there is nothing to drop.
	epoch uint64
	live  int
}

func newMemoIndex() memoIndex {
	return memoIndex{byID: map[routeID]*routeMemo{}, byPtr: map[unsafe.Pointer]*routeMemo{}, places: map[placeKey]placeID{}}
}

// memoOf returns the record of st's object from the previous translation, when it still holds,
// or a new one.
func (m *memoIndex) memoOf(st *routeState) *routeMemo {
	obj := st.route.Object()
	p := ifacePointer(obj)
	if rm := m.byPtr[p]; rm != nil && ifacePointer(rm.obj) == p && rm.obj.GetResourceVersion() == obj.GetResourceVersion() {
		m.see(rm)
		return rm
	}
	id := routeIDOf(st.key, obj)
	rm := m.byID[id]
	switch {
	case rm != nil && rm.seen == m.epoch:
		return rm // the same route twice in one Store
	case rm != nil && sameObject(rm.obj, obj):
		// A new object for what a translation reads the same (our own status write): the
		// record holds, and is found by the new object's address from now on.
		delete(m.byPtr, ifacePointer(rm.obj))
		rm.obj = obj
	default:
		if rm != nil {
			delete(m.byPtr, ifacePointer(rm.obj)) // the changed route's old object
		}
		rm = &routeMemo{obj: obj}
		m.byID[id] = rm
	}
	m.see(rm)
	m.byPtr[p] = rm
	return rm
}

func (m *memoIndex) see(rm *routeMemo) {
	if rm.seen != m.epoch {
		rm.seen = m.epoch
		m.live++
	}
}

// forget drops st's record: its Build cannot be replayed.
func (m *memoIndex) forget(st *routeState) {
	obj := st.route.Object()
	if rm := m.byID[routeIDOf(st.key, obj)]; rm != nil {
		delete(m.byPtr, ifacePointer(rm.obj))
	}
	delete(m.byID, routeIDOf(st.key, obj))
}

// sweep drops the records of routes this translation did not see (deleted, or replaced by a
// changed object). Iterating is cheap next to hashing every route's name again.
func (m *memoIndex) sweep() {
	if m.live == len(m.byID) && len(m.byPtr) == len(m.byID) {
		return // every record was used, each under the one address of its object
	}
	for id, rm := range m.byID {
		if rm.seen != m.epoch {
			delete(m.byID, id)
		}
	}
	for p, rm := range m.byPtr {
		if rm.seen != m.epoch || ifacePointer(rm.obj) != p {
			delete(m.byPtr, p)
		}
	}
}
