package translator

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Changes is what changed between two Stores, as the controller's informers saw it: the
// translation's input besides the Store, so that a route change costs an Incremental what
// changed rather than a visit of every route to find out (TranslateChanges).
//
// Without Changes an Incremental finds the routes that changed by looking each route of the
// Store up in its records (by object address), sorts them into its kept age order and sums the
// world's objects to see whether the world changed: passes over every route and every object of
// the Store, at every change. With them it takes the previous translation's routes of each kind
// in their age order, drops those the changes name, merges in the changed ones, and takes the
// world as unchanged unless Other says otherwise.
//
// Changes may name more than changed (a key whose object is the same is translated again from
// its records); they must name at least every route object that differs in what a translation
// reads (spec, labels, annotations: not a status-only update), and set Other for any change of
// an object of another kind but EndpointSlices. A Changes whose Since is not the Store the
// Incremental translated last, or that does not add up (the Store holds another number of
// routes of a kind than the previous translation's and the changes make), is not used: the
// translation then takes the path without changes, which gives the same Result.
type Changes struct {
	// Since is the Store the changes are relative to: the one the Incremental translated last.
	Since *Store
	// Routes are the route objects (of the route kinds the registry declares) added, updated or
	// deleted since, by group kind and key: the object as the Store now holds it, nil when the
	// Store holds none.
	Routes map[schema.GroupKind]map[types.NamespacedName]translation.Object
	// Other says an object of any other kind changed (EndpointSlices excepted): Gateways,
	// classes, Services, Secrets, ReferenceGrants, policies, filter objects, the objects of
	// route kinds that make implicit parents (Ingress), or any kind of object not told apart.
	Other bool
}

// kindList is an Incremental's routes of one kind as its latest translation left them: their
// states in age order, and (built when first needed) their index by name.
type kindList struct {
	sts    []*routeState
	byName map[types.NamespacedName]*routeState
}

// deltaRoutes are the route states of kind k (gk its API group kind, rgk as routes name it)
// for a translation given usable changes: the previous translation's states in age order, but
// for those the changes name or that cannot be carried over, which are made anew and merged in
// by age. ok is false, with nothing changed, when the changes cannot be used for this kind.
func (t *session) deltaRoutes(k translation.RouteKind, gk schema.GroupKind, rgk gwapiv1.RouteGroupKind) (sts []*routeState, ok bool) {
	d := t.delta
	if d == nil {
		return nil, false
	}
	if _, implicit := k.(translation.ImplicitParentKind); implicit {
		return nil, false // never carried (carry.go), and their objects are the world's
	}
	kl, routes, ok := d.check(k, gk)
	if !ok {
		return nil, false
	}
	changed := d.changes.Routes[gk]
	n := len(t.store.Objects[gk])
	epoch := t.memo.epoch
	for key := range changed {
		if st := kl.byName[key]; st != nil {
			d.gone = append(d.gone, st)
		}
	}
	// Mark the states to leave out, then keep the others in their order.
	for _, st := range d.gone {
		st.goneEpoch = epoch
	}
	var added []translation.Route
	for _, st := range kl.sts {
		switch {
		case st.goneEpoch == epoch:
		case t.carriable(k, gk, st):
			st.carryEpoch, st.memo.cur, st.memo.curEpoch = epoch, st, epoch
		default:
			// Not carried (built or attached anew last time): made anew from its records.
			d.gone = append(d.gone, st)
			st.goneEpoch = epoch
			added = append(added, st.route)
		}
	}
	for _, r := range routes {
		added = append(added, r)
	}
	fresh := t.newRouteStates(k, rgk, added)
	sortByAge(fresh)
	d.fresh = append(d.fresh, fresh...)
	sts = mergeKept(kl.sts, epoch, fresh, n)
	for key := range changed {
		delete(kl.byName, key)
	}
	for _, st := range fresh {
		kl.byName[nn(st.key.Namespace, st.key.Name)] = st
	}
	return sts, true
}

// check says whether the changes of kind k (of API group kind gk) add up to the Store: the
// kind's states are one per name, and the Store holds as many routes as the previous
// translation's and the changes make, each changed object a route of k. It returns the kind's
// list and the changed routes that the Store holds.
func (d *deltaInput) check(k translation.RouteKind, gk schema.GroupKind) (*kindList, map[types.NamespacedName]translation.Route, bool) {
	kl := d.lists[gk]
	if kl == nil {
		return nil, nil, false
	}
	changed := d.changes.Routes[gk]
	if kl.byName == nil {
		kl.byName = make(map[types.NamespacedName]*routeState, len(kl.sts))
		for _, st := range kl.sts {
			kl.byName[nn(st.key.Namespace, st.key.Name)] = st
		}
	}
	if len(kl.byName) != len(kl.sts) {
		return nil, nil, false // two routes of one name: only the full path knows their order
	}
	n := len(kl.sts)
	routes := make(map[types.NamespacedName]translation.Route, len(changed))
	for key, obj := range changed {
		if kl.byName[key] != nil {
			n--
		}
		if obj == nil {
			continue
		}
		r, isRoute := k.Route(obj)
		if !isRoute || obj.GetNamespace() != key.Namespace || obj.GetName() != key.Name {
			return nil, nil, false // a Problem the path without changes reports
		}
		routes[key] = r
		n++
	}
	if n != len(d.store.Objects[gk]) {
		return nil, nil, false
	}
	return kl, routes, true
}

// carriable is carried's test for st, a state of the previous translation that the changes do
// not name: its object is the same, so no lookup by address is needed to find its record.
func (t *session) carriable(k translation.RouteKind, gk schema.GroupKind, st *routeState) bool {
	rm := st.memo
	if rm == nil || rm.cur != st || rm.seen == t.memo.epoch || !t.current(rm) || rm.dupEpoch == rm.curEpoch ||
		st.fresh || rm.attach == nil || rm.validate == nil {
		return false
	}
	if !t.placesHold(st) {
		return false
	}
	t.memo.see(rm)
	t.memo.carried++
	return true
}

// mergeKept merges the states of prev (in age order) that were not left out in translation
// epoch (goneEpoch) and added (in age order) into one list of capacity n, in age order. Two
// distinct routes of one kind never compare equal (olderFirst ends with the name), so the merge
// is the order a sort of both would give. The kept states are not copied into a list of their
// own first: at thousands of routes that list was a tenth of a change's bytes.
func mergeKept(prev []*routeState, epoch uint64, added []*routeState, n int) []*routeState {
	out := make([]*routeState, 0, max(n, len(added)))
	keep := func(sts []*routeState) {
		for _, st := range sts {
			if st.goneEpoch != epoch {
				out = append(out, st)
			}
		}
	}
	i := 0
	for _, a := range added {
		j := i + searchYounger(prev[i:], a)
		keep(prev[i:j])
		out = append(out, a)
		i = j
	}
	keep(prev[i:])
	return out
}

// searchYounger is the index of the first route of prev (in age order) not older than a. The
// states left out of prev keep their places in the order, so they do not upset the search.
func searchYounger(prev []*routeState, a *routeState) int {
	lo, hi := 0, len(prev)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if olderFirst(prev[m].meta, a.meta) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// deltaInput is a session's view of usable Changes.
type deltaInput struct {
	changes *Changes
	store   *Store
	lists   map[schema.GroupKind]*kindList
	// gone are the previous translation's states this one does not carry over: those the
	// changes name, and those made anew from their records; fresh the states made anew.
	gone, fresh []*routeState
	// allKinds says every route kind's states were made from the changes, or (an implicit
	// kind) wholly from the same records as before: then gone and fresh are all the routes
	// that are not settled (routeMemo.settled), and dirty can be told from them.
	allKinds bool
	dirty    map[string]bool
}

// dirtyHostnames are the hostnames whose virtual hosts may differ from the previous
// translation's when the changes were used: those the routes that were not carried over are
// placed on now, and those the states they replace were placed on. It is what dirtyHosts
// finds by a visit of every attachment and every previous virtual host's entries, without
// it, for every server (a hostname of another server is gathered in vain, which is harmless).
func (d *deltaInput) dirtyHostnames() map[string]bool {
	if d.dirty != nil {
		return d.dirty
	}
	d.dirty = map[string]bool{}
	for _, sts := range [...][]*routeState{d.gone, d.fresh} {
		for _, st := range sts {
			for _, a := range st.attachments {
				for _, h := range a.hostnames {
					d.dirty[h] = true
				}
			}
		}
	}
	return d.dirty
}

// forgetGone drops the records of the routes that left (their record was not used by this
// translation), so that sweep need not look at every record to find them.
func (d *deltaInput) forgetGone(m *memoIndex) {
	for _, st := range d.gone {
		rm := st.memo
		if rm == nil || rm.seen == m.epoch {
			continue
		}
		id := routeIDOf(st.key, rm.obj)
		if m.byID[id] == rm {
			delete(m.byID, id)
		}
		if p := ifacePointer(rm.obj); m.byPtr[p] == rm {
			delete(m.byPtr, p)
		}
	}
}

// tookFullPath notes that kind k's states sts were made without the changes: its unsettled
// routes are known only if it is an implicit kind whose routes were all replayed from the same
// records (its objects are the world's: the changes hold none of them).
func (d *deltaInput) tookFullPath(k translation.RouteKind, sts []*routeState, epoch uint64) {
	if _, implicit := k.(translation.ImplicitParentKind); !implicit {
		d.allKinds = false
		return
	}
	for _, st := range sts {
		if st.memo == nil || st.fresh || st.memo.dupEpoch == epoch {
			d.allKinds = false
			return
		}
	}
}
