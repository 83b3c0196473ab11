package translator

import (
	"sync/atomic"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The route statuses of an Incremental's Results, handed over by what changed. At thousands of
// routes a route change changes one or two route statuses (statusmemo.go reuses the others as
// the same objects), but building Result.Routes afresh hashed every route's key, and the
// controller then turned that map into the status writer's (hashing every key again) and the
// writer compared every entry with the previous one: ~10 ms of a 5,000-route change's wall
// time on the loaded machine (`prepared` in the controller's `published` line). Now:
//
//   - Result.Routes shares the previous Result's statuses and holds the changed keys on top
//     (RouteStatuses, routestatuses.go);
//   - the Result says which keys changed since an earlier Result of the same Incremental
//     (RouteStatusChanges), so the controller hands the writer those only and the writer
//     compares those only;
//   - given Changes (changes.go), only the routes whose status may differ are looked at
//     (byChange): those not carried over (carry.go), those other routes' passes wrote into
//     this time (shadowing, kind conflicts: crossTouched), and those they wrote into last time
//     (irregular). A carried route that none wrote into, this time or last, has the same parent
//     statuses as then (its attachment record's), so its status is the same object, which the
//     previous Result holds already.
//
// A route's status is "the same" when statusmemo.go reused its record's status and that record
// put it into the previous translation's Result: then the previous map holds that very status
// under the route's key, provided no two routes of the previous translation had one key. The
// owners map (key → the record whose status the map holds) finds the collisions a Store with
// one route twice would make, and the routes that left; when anything does not add up, the map
// is built afresh and the Result knows no changes (its consumers compare everything, as before).
// TestIncrementalEqualsTranslate checks the map against a full translation's, and the changes
// against a comparison of the two maps, after every step.
type statusHandOver struct {
	// seq counts the translations of the Incremental (statusRecord.seq).
	seq uint64
	// routes is the previous Result's Routes, owners the record whose status each of its keys
	// holds (owners nil: the next translation builds afresh).
	routes RouteStatuses
	owners map[RouteKey]*statusRecord
	// irregular are the records of the routes whose status the previous translation made with
	// what other routes wrote into their parent statuses (crossTouched).
	irregular []*routeMemo
	// chain are the latest Results' changes, oldest first (at most maxChangeChain).
	chain []*routeChanges
	// scratch holds one translation's route statuses, in t.routes' order.
	scratch []*gwapiv1.RouteStatus
	// byChanges says the latest translation looked at the statuses byChange picks only.
	byChanges bool
}

// maxChangeChain bounds how far back RouteStatusChanges looks: the controller asks about the
// Result before the latest one or two.
const maxChangeChain = 8

// routeChanges are the keys whose status one translation changed against the one before
// (a status of another object, or a route that came or left); all says that is not known.
type routeChanges struct {
	seq  uint64
	all  bool
	keys []RouteKey
	// prev is the previous translation's; nil beyond maxChangeChain. Atomic because a
	// translation cuts the chain of Results that others may still hold.
	prev atomic.Pointer[routeChanges]
}

// RouteStatusChanges returns the keys of the routes whose status in res is not the one (the
// same object) in since.Routes, or that only one of the two has, when both are Results of one
// Incremental, since the earlier, and it still knows what the translations in between changed;
// ok is false otherwise, and then only comparing the two maps tells. A key may be listed whose
// status is equal in both (a rebuilt status that says the same), and once per translation it
// changed in.
func (res *Result) RouteStatusChanges(since *Result) (keys []RouteKey, ok bool) {
	if res == nil || since == nil || res.changes == nil || since.changes == nil {
		return nil, false
	}
	for c := res.changes; c != since.changes; c = c.prev.Load() {
		if c == nil || c.all || c.seq <= since.changes.seq {
			return nil, false
		}
		keys = append(keys, c.keys...)
	}
	return keys, true
}

// routeStatuses fills res.Routes (and res.changes) for an Incremental's translation t.
func (h *statusHandOver) routeStatuses(t *session, res *Result) {
	h.seq++
	t.statusSeq = h.seq
	c := &routeChanges{seq: h.seq}
	touched := t.crossTouched()
	afterByChange := h.byChanges
	h.byChanges = h.owners != nil && t.delta != nil && t.delta.allKinds && h.byChange(t, touched, res, c)
	if !h.byChanges {
		c.keys = c.keys[:0]
		h.everyRoute(t, res, c, afterByChange)
	}
	h.irregular = h.irregular[:0]
	for _, st := range touched {
		if st.memo != nil {
			h.irregular = append(h.irregular, st.memo)
		}
	}
	res.changes = c
	if n := len(h.chain); n > 0 {
		c.prev.Store(h.chain[n-1])
	}
	h.chain = append(h.chain, c)
	if len(h.chain) > maxChangeChain {
		h.chain = append(h.chain[:0], h.chain[len(h.chain)-maxChangeChain:]...)
		h.chain[0].prev.Store(nil)
	}
}

// crossTouched are the routes of t whose parent statuses other routes' passes wrote into:
// shadowed (vhosts.go) or in a kind conflict (kindconflict.go). A route may be listed twice.
func (t *session) crossTouched() []*routeState {
	var out []*routeState
	if t.vhosts != nil {
		out = t.vhosts.touched
		t.vhosts.touched = nil
	}
	for _, c := range t.conflicted {
		out = append(out, c.route)
	}
	return out
}

// byChange makes res.Routes from the previous Result's by the routes whose status may have
// changed (above), when the changes were used for every route kind; false, with the next
// translation made to build afresh, when that does not add up.
func (h *statusHandOver) byChange(t *session, touched []*routeState, res *Result, c *routeChanges) bool {
	epoch := t.memo.epoch
	var cands []*routeState
	look := func(st *routeState) {
		if st.statusSeq != h.seq {
			st.statusSeq = h.seq
			cands = append(cands, st)
		}
	}
	for _, st := range t.uncarried {
		look(st)
	}
	for _, st := range touched {
		look(st)
	}
	for _, rm := range h.irregular {
		// Not carried: among t.uncarried if it is still a route of t.
		if st := rm.cur; ((rm.curEpoch == epoch && st.carryEpoch == epoch) || (t.keeping && st.kept)) && len(st.parents) > 0 {
			look(st)
		}
	}
	n := t.routeCount()
	if len(cands) > 64 && len(cands) > n/4 {
		return false // as many as that: everyRoute is as cheap, and can rebuild
	}
	statuses := h.scratch[:0]
	for _, st := range cands {
		if st.memo == nil || st.memo.dupEpoch == epoch {
			return false
		}
		rs, _ := t.routeStatusOf(st)
		statuses = append(statuses, rs)
	}
	h.scratch = statuses
	defer clear(h.scratch) // no status kept alive from here
	t.memo.statuses += n - len(cands)
	edit := editRouteStatuses(h.routes)
	set := make(map[RouteKey]bool, len(cands))
	for i, st := range cands {
		if set[st.key] {
			h.owners = nil // two routes of one key
			return false
		}
		set[st.key] = true
		rs := statuses[i]
		if prev, ok := h.routes.Lookup(st.key); ok && prev == rs && h.owners[st.key] == st.memo.status {
			continue
		}
		edit.set(st.key, rs)
		h.owners[st.key] = st.memo.status
		c.keys = append(c.keys, st.key)
	}
	for _, st := range t.delta.gone {
		if set[st.key] {
			continue
		}
		if _, had := h.owners[st.key]; had {
			edit.remove(st.key)
			delete(h.owners, st.key)
			c.keys = append(c.keys, st.key)
		}
	}
	out := edit.done()
	if out.Len() != n || len(h.owners) != n {
		h.owners = nil // a key of two routes, or one that left unseen: build afresh
		return false
	}
	res.Routes, h.routes = out, out
	return true
}

// everyRoute makes res.Routes by a look at every route's status. After a translation that
// looked by change, the records of the routes it did not look at do not say they are in the
// previous Result (statusRecord.seq), so the previous Result is asked instead: else every
// such route would count as changed, and the hand-over would give the writer every status.
func (h *statusHandOver) everyRoute(t *session, res *Result, c *routeChanges, afterByChange bool) {
	statuses := h.scratch[:0]
	var changed []int // indexes into t.routes of the routes whose status is not the same
	dup := false
	t.allRoutes()
	for i, st := range t.routes {
		rs, same := t.routeStatusOf(st)
		if afterByChange && !same && h.owners != nil && st.memo != nil {
			same = h.routes.Get(st.key) == rs && h.owners[st.key] == st.memo.status
		}
		statuses = append(statuses, rs)
		if !same {
			changed = append(changed, i)
		}
		dup = dup || st.memo == nil || st.memo.dupEpoch == t.memo.epoch
	}
	h.scratch = statuses
	if h.owners == nil || dup || len(changed) > len(t.routes)/4 || !h.update(t, statuses, changed, res, c) {
		h.rebuild(t, statuses, res)
		c.all, c.keys = true, nil
	}
	clear(h.scratch) // no status kept alive from here
}

// update makes res.Routes from the previous map and the changed routes; false when a key
// collision makes that unsound (then h is as it was).
func (h *statusHandOver) update(t *session, statuses []*gwapiv1.RouteStatus, changed []int, res *Result, c *routeChanges) bool {
	keys := make(map[RouteKey]bool, len(changed))
	for _, i := range changed {
		st := t.routes[i]
		if keys[st.key] {
			return false // two changed routes of one key
		}
		keys[st.key] = true
		if o := h.owners[st.key]; o != nil && o != st.memo.status && o.seq == h.seq {
			return false // a route whose status is the same has this key too
		}
	}
	routes := editRouteStatuses(h.routes)
	for _, i := range changed {
		st := t.routes[i]
		routes.set(st.key, statuses[i])
		h.owners[st.key] = st.memo.status
		c.keys = append(c.keys, st.key)
	}
	if t.delta != nil && len(h.owners) > len(t.routes) {
		// Routes that left, when the changes said which may have (changes.go).
		for _, st := range t.delta.gone {
			if o := h.owners[st.key]; o != nil && o.seq != h.seq {
				delete(h.owners, st.key)
				routes.remove(st.key)
				c.keys = append(c.keys, st.key)
			}
		}
	}
	if len(h.owners) > len(t.routes) {
		// Routes that left: every key of the map but these is held by a route of this
		// translation (same or changed), so a count says whether there are any.
		for k, o := range h.owners {
			if o.seq != h.seq {
				delete(h.owners, k)
				routes.remove(k)
				c.keys = append(c.keys, k)
			}
		}
	}
	res.Routes = routes.done()
	h.routes = res.Routes
	return true
}

// routeCount is the number of routes with one of our parents (len(t.routes), which a route
// pass from the kept set does not make: allRoutes).
func (t *session) routeCount() int {
	if t.keeping {
		return t.routeN
	}
	return len(t.routes)
}

// allRoutes makes t.routes, when the route pass was the kept set's, from the kinds' lists.
func (t *session) allRoutes() []*routeState {
	if t.keeping && t.routes == nil {
		t.routes = make([]*routeState, 0, t.routeN)
		for _, k := range t.kinds {
			if kl := t.kindLists[k.API().GVK.GroupKind()]; kl != nil {
				for _, st := range kl.sts {
					if len(st.parents) > 0 {
						t.routes = append(t.routes, st)
					}
				}
			}
		}
	}
	return t.routes
}

// rebuild makes res.Routes afresh, and the owners for the next translation.
func (h *statusHandOver) rebuild(t *session, statuses []*gwapiv1.RouteStatus, res *Result) {
	m := make(map[RouteKey]*gwapiv1.RouteStatus, len(t.routes))
	h.owners = make(map[RouteKey]*statusRecord, len(t.routes))
	for i, st := range t.routes {
		m[st.key] = statuses[i]
		if st.memo != nil {
			h.owners[st.key] = st.memo.status
		}
	}
	res.Routes = routeStatusesOf(m)
	h.routes = res.Routes
	if len(m) != len(t.routes) || len(h.owners) != len(t.routes) {
		h.routes, h.owners = RouteStatuses{}, nil // keys collide: the next translation builds afresh too
	}
}
