package translator

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// The route pass kept across translations. Carrying a settled route over (carry.go) still cost a
// visit of every route per change: its state checked and taken over, its listeners re-pointed,
// its attachments appended to this translation's listeners and its builds' session effects
// replayed (a third of a 5,000-route change's CPU, most of it cache misses). While the world is
// unchanged and the translation is told what changed (changes.go), those visits give the very
// same listener lists, counts and effects as the time before, but for the routes that changed.
// So an Incremental keeps them (keptSet): each listener's attachments in the route pass's order
// (kind, then age), the clusters, filter clusters and unresolved ExtensionRefs its routes' records
// name (each with a count of the routes naming it), their problems and warnings; and patches them
// by the states that leave (the changed routes' previous states) and those made anew. A kept
// route is not visited at all: its state, status and attachments stay as they are.
//
// What the kept set cannot say falls back to the route pass of carry.go, which rebuilds the set
// at its end: a translation without usable Changes or whose world changed, a Store with routes of
// an implicit kind (Ingress: never carried, and yielding rewrites their attachments), a route
// whose records are incomplete (a build that read a remote document, an attachment that cannot be
// replayed: keepable). Passes over several routes still run on the kept lists: a listener holding
// both kinds of an exclusive pair scans its attachments (kindconflict.go), and a server a
// cross-route pass touched is gathered whole (vhosts.go).

// keptSet is the route pass of an Incremental's latest translation, kept for the next.
type keptSet struct {
	// epoch is the translation (memoIndex.epoch) the set is of; stale says it does not hold
	// every route of that translation (a state that is not keepable), so the next translation
	// takes carry.go's route pass, which makes a new set. Either way every state whose kept is
	// set was a route state of that translation (carried's test of being current).
	epoch uint64
	stale bool
	// listeners are the attachments of each listener, by placeID.
	listeners []*keptListener
	// n counts the kept states, withParents those with parentRefs of ours (the route statuses).
	n, withParents int
	// clusters are the clusters the kept states' records name, with their counts; slices is
	// the Store's EndpointSlices list their endpoints were computed from.
	clusters map[string]*keptCluster
	slices   []*discoveryv1.EndpointSlice
	// filterClusters and unresolved count the kept records' filter clusters and missing
	// ExtensionRefs; problems and warnings the kept routes', by Problem.Error.
	filterClusters     map[string]int
	unresolved         map[[2]string]int
	problems, warnings map[string]*keptProblem
	// pending are the states of that translation that are not keepable: their attachments are
	// in the lists (unlike their effects), and the next translation makes them anew.
	pending []*routeState
	// freshKept are states kept while built anew (routeState.fresh): the next translation
	// clears their mark, for their records now say all of them (as carried assumes).
	freshKept []*routeState
}

type keptCluster struct {
	c *irv1.Cluster
	n int
}

type keptProblem struct {
	p *Problem
	n int
}

// keptListener is one listener's attachments, ordered as the route pass appends them: by
// route kind (t.kinds' order), then age. byHost holds them by hostname, in the same order, so
// that gathering a changed hostname does not visit every attachment (gather); kinds counts them
// by route kind (the kind-conflict pass).
type keptListener struct {
	// l stands for the listener in the placedOn of the kept states (placeID is what is read of
	// it): a kept state would otherwise keep the listener states of the translation that made
	// it, and their Gateway's, alive, one set per translation.
	l      *listenerState
	routes []*attachment
	byHost map[string][]*attachment
	kinds  map[schema.GroupKind]int
}

func newKeptSet(epoch uint64) *keptSet {
	return &keptSet{epoch: epoch, clusters: map[string]*keptCluster{}, filterClusters: map[string]int{},
		unresolved: map[[2]string]int{}, problems: map[string]*keptProblem{}, warnings: map[string]*keptProblem{}}
}

// keepable says st can stay in the kept set: it is its route's state, of a kind that is not
// implicit, once in the Store, and its records say all of it (what carry.go's carried asks of a
// state, but for having been built anew: a state built anew has its records now, and carrying
// it gives the same state).
func (t *session) keepable(st *routeState) bool {
	rm := st.memo
	if rm == nil || rm.cur != st || rm.dupEpoch == t.memo.epoch || st.noKeep || rm.validate == nil || rm.attach == nil || rm.hosts == nil {
		return false
	}
	if _, implicit := st.kind.(translation.ImplicitParentKind); implicit {
		return false
	}
	byID := t.listenersOfPlaces()
	for _, l := range st.placedOn {
		if !l.pidSet || int(l.pid) >= len(byID) || byID[l.pid] == nil {
			return false
		}
		if byID[l.pid].programmed() && rm.placeRecordOf(l.pid) == nil {
			return false
		}
	}
	return true
}

// listener is the kept listener of placeID id.
func (k *keptSet) listener(id placeID) *keptListener {
	for int(id) >= len(k.listeners) {
		k.listeners = append(k.listeners, nil)
	}
	if k.listeners[id] == nil {
		k.listeners[id] = &keptListener{byHost: map[string][]*attachment{}, kinds: map[schema.GroupKind]int{}}
	}
	return k.listeners[id]
}

// take counts st among the kept states: marked, numbered, remembered as fresh if it is, and its
// records' effects, problems and warnings counted.
func (k *keptSet) take(t *session, st *routeState) {
	st.kept = true
	k.n++
	if st.fresh {
		k.freshKept = append(k.freshKept, st)
	}
	k.count(t, st, 1)
}

// add puts st into the set: its attachments into its listeners' lists (in order), its records'
// effects, problems and warnings into the counts.
func (k *keptSet) add(t *session, st *routeState) {
	k.take(t, st)
	for j, a := range st.attachments {
		kl := k.listener(st.placedOn[j].pid)
		kl.insert(a)
		if kl.l == nil {
			kl.l = st.placedOn[j]
		}
		st.placedOn[j] = kl.l
	}
}

// remove takes st out of the set, as add put it in.
func (k *keptSet) remove(t *session, st *routeState) {
	if !st.kept {
		return
	}
	st.kept = false
	k.n--
	for j, a := range st.attachments {
		k.listener(st.placedOn[j].pid).remove(a)
	}
	k.count(t, st, -1)
}

// count adds (by 1 or -1) what carry would replay for st, and its problems and warnings.
func (k *keptSet) count(t *session, st *routeState, by int) {
	rm := st.memo
	k.countRecord(t, rm.validate, by)
	byID := t.listenersOfPlaces()
	for _, l := range st.placedOn {
		if byID[l.pid].programmed() {
			k.countRecord(t, rm.placeRecordOf(l.pid), by)
		}
	}
	if len(st.parents) == 0 {
		return // the route pass reports only the problems of routes with one of our parents
	}
	k.withParents += by
	countProblems(k.problems, st.problems, by)
	for _, p := range st.warnings {
		countProblems(k.warnings, []*Problem{p}, by)
	}
}

func countProblems(m map[string]*keptProblem, ps []*Problem, by int) {
	for _, p := range ps {
		key := p.Error()
		e := m[key]
		if e == nil {
			e = &keptProblem{p: p}
			m[key] = e
		}
		if e.n += by; e.n <= 0 {
			delete(m, key)
		}
	}
}

func (k *keptSet) countRecord(t *session, r *buildRecord, by int) {
	if r == nil {
		return
	}
	for _, c := range r.clusters {
		name := c.GetName()
		e := k.clusters[name]
		if e == nil {
			cur := t.clusters[name] // made or replayed by this translation, endpoints current
			if cur == nil {
				cur = c
			}
			e = &keptCluster{c: cur}
			k.clusters[name] = e
		}
		if e.n += by; e.n <= 0 {
			delete(k.clusters, name)
		}
	}
	for _, name := range r.filterClusters {
		if k.filterClusters[name] += by; k.filterClusters[name] <= 0 {
			delete(k.filterClusters, name)
		}
	}
	for _, u := range r.unresolved {
		if k.unresolved[u] += by; k.unresolved[u] <= 0 {
			delete(k.unresolved, u)
		}
	}
}

// compareAttachments orders attachments of one listener as the route pass appends them.
func compareAttachments(a, b *attachment) int {
	x, y := a.route, b.route
	switch {
	case x.kindIdx != y.kindIdx:
		return x.kindIdx - y.kindIdx
	case x == y:
		return 0
	case olderFirst(x.meta, y.meta):
		return -1
	case olderFirst(y.meta, x.meta):
		return 1
	}
	return 0
}

func (kl *keptListener) insert(a *attachment) {
	kl.routes = insertAttachment(kl.routes, a)
	for _, h := range a.hostnames {
		kl.byHost[h] = insertAttachment(kl.byHost[h], a)
	}
	kl.kinds[routeGroupKind(a.route)]++
}

func (kl *keptListener) remove(a *attachment) {
	kl.routes = removeAttachment(kl.routes, a)
	for _, h := range a.hostnames {
		if rest := removeAttachment(kl.byHost[h], a); len(rest) > 0 {
			kl.byHost[h] = rest
		} else {
			delete(kl.byHost, h)
		}
	}
	gk := routeGroupKind(a.route)
	if kl.kinds[gk]--; kl.kinds[gk] <= 0 {
		delete(kl.kinds, gk)
	}
}

func insertAttachment(list []*attachment, a *attachment) []*attachment {
	i, _ := slices.BinarySearchFunc(list, a, compareAttachments)
	return slices.Insert(list, i, a)
}

// removeAttachment removes a, which is in list at its place in the order.
func removeAttachment(list []*attachment, a *attachment) []*attachment {
	i, _ := slices.BinarySearchFunc(list, a, compareAttachments)
	for ; i < len(list); i++ {
		if list[i] == a {
			return slices.Delete(list, i, i+1)
		}
	}
	panic("translator: a kept attachment is not in its listener's list")
}

// sameList says a and b are one list (the driver's patched Store shares the lists of the kinds
// that did not change: storepatch.go).
func sameList[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// kindRank is k's place in t.kinds, the order of the route pass.
func (t *session) kindRank(k translation.RouteKind) int {
	gk := k.API().GVK.GroupKind() // a kind module need not be comparable
	for i, x := range t.kinds {
		if x.API().GVK.GroupKind() == gk {
			return i
		}
	}
	return len(t.kinds)
}

// keepRoutes is translateRoutes from the kept set: the routes the Changes name, and the states
// of the previous translation they replace, patched into it. false, having changed nothing, when
// the set or the Changes cannot be used (then translateRoutes runs as in carry.go).
func (t *session) keepRoutes() bool {
	k := t.kept
	if t.delta == nil || k == nil || k.stale || k.epoch+1 != t.memo.epoch {
		return false
	}
	type kindPlan struct {
		gk     schema.GroupKind
		rgk    gwapiv1.RouteGroupKind
		kl     *kindList
		routes map[types.NamespacedName]translation.Route
		fresh  []*routeState
	}
	plans := make([]kindPlan, len(t.kinds))
	for i, kind := range t.kinds {
		api := kind.API()
		p := &plans[i]
		p.gk, p.rgk = api.GVK.GroupKind(), normalGroupKind(api.GroupKind())
		if _, implicit := kind.(translation.ImplicitParentKind); implicit {
			if len(t.store.Objects[p.gk]) > 0 {
				return false
			}
			continue
		}
		var ok bool
		if p.kl, p.routes, ok = t.delta.check(kind, p.gk); !ok {
			return false
		}
	}
	t.keeping = true
	epoch := t.memo.epoch
	d := t.delta
	t.resetTouched()
	pending := k.pending
	k.pending = nil
	for _, st := range pending {
		for j, a := range st.attachments {
			k.listener(st.placedOn[j].pid).remove(a)
		}
	}
	for i, kind := range t.kinds {
		p := &plans[i]
		if p.kl == nil {
			t.kindLists[p.gk] = &kindList{}
			continue
		}
		var gone []*routeState
		for key := range d.changes.Routes[p.gk] {
			if st := p.kl.byName[key]; st != nil {
				st.goneEpoch = epoch
				gone = append(gone, st)
				k.remove(t, st)
			}
		}
		added := make([]translation.Route, 0, len(p.routes))
		for _, r := range p.routes {
			added = append(added, r)
		}
		for _, st := range pending {
			if st.kindIdx != i || st.goneEpoch == epoch {
				continue // another kind's, or named by the changes (above)
			}
			st.goneEpoch = epoch
			gone = append(gone, st)
			added = append(added, st.route)
		}
		d.gone = append(d.gone, gone...)
		p.fresh = t.newRouteStates(kind, p.rgk, added)
		sortByAge(p.fresh)
		d.fresh = append(d.fresh, p.fresh...)
		p.kl.sts = patchKindList(p.kl.sts, gone, p.fresh)
		for key := range d.changes.Routes[p.gk] {
			delete(p.kl.byName, key)
		}
		for _, st := range p.fresh {
			p.kl.byName[nn(st.key.Namespace, st.key.Name)] = st
		}
		t.kindLists[p.gk] = p.kl
	}
	t.keptClusters()
	freshWithParents := 0
	for i := range t.kinds {
		for _, st := range plans[i].fresh {
			t.validateRoute(st)
			t.setRouteHostnames(st)
			t.attachRoute(st, st.route)
			if len(st.parents) > 0 {
				freshWithParents++
				if t.handOver != nil {
					t.uncarried = append(t.uncarried, st) // statuschanges.go
				}
				for _, p := range st.warnings {
					t.warnings[p.Error()] = p
				}
				for _, p := range st.problems {
					t.problems[p.Error()] = p
				}
			}
		}
	}
	for i := range t.kinds {
		for _, st := range plans[i].fresh {
			if t.keepable(st) {
				k.add(t, st)
				continue
			}
			// Served as it is this time, in the lists; made anew next time.
			k.pending = append(k.pending, st)
			for j, a := range st.attachments {
				k.listener(st.placedOn[j].pid).insert(a)
			}
			if len(st.parents) > 0 {
				t.routeN++
			}
		}
	}
	t.memo.carried = k.n - len(d.fresh)
	t.routeN += k.withParents
	t.fromKept()
	return true
}

// patchKindList takes gone out of sts (a kind's states in age order) and puts fresh (in age
// order) in, in place.
func patchKindList(sts, gone, fresh []*routeState) []*routeState {
	for _, st := range gone {
		i := searchYounger(sts, st)
		for ; i < len(sts) && sts[i] != st; i++ {
		}
		if i < len(sts) {
			sts = slices.Delete(sts, i, i+1)
		}
	}
	for _, st := range fresh {
		sts = slices.Insert(sts, searchYounger(sts, st), st)
	}
	return sts
}

// resetTouched resets what other routes' passes wrote into the kept routes of the previous
// translation (shadowing, kind conflicts: statusHandOver.irregular), as carry does for every
// carried route: those passes write it again.
func (t *session) resetTouched() {
	if t.handOver == nil {
		return
	}
	for _, rm := range t.handOver.irregular {
		st := rm.cur
		if st == nil || !st.kept || rm.attach == nil || len(rm.attach.parents) != len(st.parents) {
			continue
		}
		for i, pr := range rm.attach.parents {
			ps := st.parents[i]
			ps.accepted, ps.shadowed, ps.kindConflicts = pr.accepted, nil, nil
		}
	}
}

// keptClusters puts the kept clusters into the session, before any build looks one up; their
// endpoints are computed again only when the Store's EndpointSlices are another list.
func (t *session) keptClusters() {
	k := t.kept
	refresh := !sameList(k.slices, t.store.EndpointSlices)
	k.slices = t.store.EndpointSlices
	for name, e := range k.clusters {
		if refresh {
			e.c = t.refreshCluster(e.c)
		}
		if _, ok := t.clusters[name]; !ok {
			t.clusters[name] = e.c
		}
	}
}

// fromKept gives this translation's listeners their kept lists, and the session the kept
// routes' filter clusters, unresolved ExtensionRefs, problems and warnings.
func (t *session) fromKept() {
	k := t.kept
	for _, g := range t.gateways {
		for _, l := range g.listeners {
			kl := k.listener(t.placeIDOf(l))
			l.routes, l.attached, l.kept = kl.routes, int32(len(kl.routes)), kl
		}
	}
	for name := range k.filterClusters {
		t.filterClusters[name] = true
	}
	for u := range k.unresolved {
		if t.unresolvedFilters[u[0]] == nil {
			t.unresolvedFilters[u[0]] = map[string]bool{}
		}
		t.unresolvedFilters[u[0]][u[1]] = true
	}
	for key, e := range k.problems {
		t.problems[key] = e.p
	}
	for key, e := range k.warnings {
		t.warnings[key] = e.p
	}
}

// rebuildKept makes the kept set of a translation that took carry.go's route pass, at its end
// (the listeners' lists before the kind-conflict pass takes anything off them).
func (t *session) rebuildKept() *keptSet {
	epoch := t.memo.epoch
	k := newKeptSet(epoch)
	for _, kind := range t.kinds {
		kl := t.kindLists[kind.API().GVK.GroupKind()]
		if kl == nil {
			continue
		}
		if _, implicit := kind.(translation.ImplicitParentKind); implicit && len(kl.sts) > 0 {
			k.stale = true // the states are current (carried needs no mark): nothing to keep
			return k
		}
	}
	for _, kind := range t.kinds {
		kl := t.kindLists[kind.API().GVK.GroupKind()]
		if kl == nil {
			continue
		}
		for _, st := range kl.sts {
			st.kept = false
			if !t.keepable(st) {
				k.pending = append(k.pending, st)
				continue
			}
			k.take(t, st)
		}
	}
	for _, g := range t.gateways {
		for _, l := range g.listeners {
			kl := k.listener(t.placeIDOf(l))
			kl.l = l
			kl.routes = slices.Clone(l.routes)
			for _, a := range l.routes {
				for _, h := range a.hostnames {
					kl.byHost[h] = append(kl.byHost[h], a)
				}
				kl.kinds[routeGroupKind(a.route)]++
			}
		}
	}
	k.slices = t.store.EndpointSlices
	return k
}
