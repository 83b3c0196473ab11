package translator

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Incremental translates a sequence of Stores, reusing what each route's kind module built for
// the previous one. It gives exactly what Translate gives for the same Store and Options (the
// same Snapshot.Version, the same statuses, but for the earlier lastTransitionTime of the route
// statuses it reuses: statusmemo.go); TestIncrementalEqualsTranslate checks that after random
// sequences of creates, updates and deletes of every kind.
//
// What is reused, and when: a route's Build calls (one validation pass, one per listener it is
// placed on) are the bulk of a translation. Their outcome depends on the route object and on the
// world around it (Gateways and their listeners, Services, ReferenceGrants, namespaces, policies,
// Secrets, filter objects, the options), never on the other routes. So each Build is recorded
// with what it did to the translation (the rules it dropped or failed, the references it could
// not resolve, its warnings, the clusters it named, the ExtensionRefs it found missing) and, while
// the route object and the world stay the same, replayed instead of run. EndpointSlices are not
// part of the world: a replayed cluster's endpoints are recomputed from the Store, as the
// endpoints fast path does. Attachment is recorded and replayed the same way (attachmemo.go), and
// a route whose previous translation replayed all of it keeps its whole translated state
// (carry.go). What relates routes to each other (listener counts, precedence, conflicts,
// shadowing) runs through the same code as in Translate, so there is one code path for it; it
// is made cheap by keeping what did not change: the virtual hosts of hostnames no changed route
// is on (vhosts.go), the age order (ageorder.go), the statuses (statusmemo.go).
//
// A change to the world drops every record: the next translation is a full one (and records
// afresh). A Build that read something outside Store and Options (a remote document), or that
// left a mark outside its route (a BackendTLSPolicy ancestor) is never recorded.
//
// "The same object" is pointer identity: the informers' caches and the file loader replace an
// object that changes and never modify one in place (the Store contract). Incremental keeps the
// objects of the previous Store referenced, so no new object can take the address of one it
// compares against. An Incremental is not safe for concurrent use.
type Incremental struct {
	seed  maphash.Seed
	world worldKey
	// routes are the records of the previous translation, by route and by object address
	// (memos.go).
	routes memoIndex
	// keep holds the Store the records were made from, so its objects' addresses stay taken.
	keep   *Store
	sealer sealer
	vhosts vhostMemo
	ages   ageOrder
	// handOver hands over the route statuses by what changed (statuschanges.go).
	handOver statusHandOver
	// lists are the latest translation's route states by kind (changes.go); routesHint its
	// listeners' numbers of attachments, by placeID; usedChanges says it used its Changes.
	lists       map[schema.GroupKind]*kindList
	routesHint  []int32
	usedChanges bool
	// keptPass says the latest translation's route pass was the kept set's (keep.go).
	keptPass bool
	// kept is the latest translation's route pass, kept for the next (keep.go).
	kept *keptSet
	// stats of the latest translation.
	reused, built, statuses, carried int
}

// NewIncremental returns an Incremental with no records: its first translation is a full one.
func NewIncremental() *Incremental { return &Incremental{seed: maphash.MakeSeed()} }

// Translate is Translate(ctx, store, opts), reusing the records of the previous call.
func (inc *Incremental) Translate(ctx context.Context, store *Store, opts Options) *Result {
	return inc.TranslateChanges(ctx, store, opts, nil)
}

// TranslateChanges is Translate, told by ch what changed since the Store of the previous call
// (changes.go); a nil or unusable ch is no help, and the Result is the same either way.
func (inc *Incremental) TranslateChanges(ctx context.Context, store *Store, opts Options, ch *Changes) *Result {
	t := newSession(ctx, store, opts)
	usable := ch != nil && !ch.Other && inc.keep != nil && ch.Since == inc.keep && inc.lists != nil
	var w worldKey
	if usable {
		w = inc.world // no object of the world changed: only the options may have
		w.registered, w.opts = inc.optionsOf(t.opts)
	} else {
		w = inc.worldOf(store, t.opts, t.kinds)
	}
	fresh := w != inc.world || inc.routes.byID == nil
	if fresh {
		inc.routes = newMemoIndex() // the world changed: nothing recorded holds any more
		inc.vhosts = vhostMemo{}    // their entries are of records of a world that is gone
		inc.lists, inc.routesHint = nil, nil
		inc.kept = nil
	}
	inc.world = w
	inc.routes.epoch++
	inc.routes.live = 0
	t.memo = &memoSet{memoIndex: &inc.routes}
	t.sealer = &inc.sealer
	inc.vhosts.start()
	t.vhosts = &inc.vhosts
	t.ages = &inc.ages
	t.handOver = &inc.handOver
	t.kindLists = map[schema.GroupKind]*kindList{}
	t.routesHint = inc.routesHint
	if k := inc.kept; k != nil && k.epoch+1 == inc.routes.epoch {
		t.kept, t.keptCurrent = k, true
		for _, st := range k.freshKept {
			st.fresh = false // its records say all of it now (keep.go)
		}
		k.freshKept = nil
	}
	if usable && !fresh {
		t.delta = &deltaInput{changes: ch, store: t.store, lists: inc.lists, allKinds: true}
		t.ages = nil // the kept lists are the age order; the next translation without changes sorts afresh
		inc.ages = ageOrder{}
	}
	res := t.run()
	// A carried route can keep the allocation it was built in, and with it that translation's
	// listener states, reachable; their attachment lists, a pointer per route, were ~50 KB per
	// route change at 5,000 routes (BenchmarkTranslateIncremental's live-MB). Nothing reads a
	// listener's attachments after the translation, so they go here; their lengths size the
	// next translation's lists.
	inc.routesHint = inc.routesHint[:0]
	for _, g := range t.gateways {
		for _, l := range g.listeners {
			if l.pidSet {
				for int(l.pid) >= len(inc.routesHint) {
					inc.routesHint = append(inc.routesHint, 0)
				}
				inc.routesHint[l.pid] = int32(len(l.routes))
			}
			l.routes = nil
		}
	}
	if t.delta != nil {
		t.delta.forgetGone(&inc.routes)
	}
	if !t.keeping {
		inc.routes.sweep() // a kept route's record is not seen, and forgetGone found those that left
	}
	inc.kept = t.kept
	if inc.kept != nil {
		inc.kept.epoch = inc.routes.epoch
	}
	inc.lists = t.kindLists
	inc.keep = store
	inc.reused, inc.built, inc.statuses, inc.carried = t.memo.reused, t.memo.built, t.memo.statuses, t.memo.carried
	inc.usedChanges = t.delta != nil
	inc.keptPass = t.keeping
	return res
}

// UsedChanges says whether the latest translation used the Changes it was given.
func (inc *Incremental) UsedChanges() bool { return inc.usedChanges }

// KeptPass says whether the latest translation patched the kept route pass of the one before
// (keep.go) rather than visiting every route.
func (inc *Incremental) KeptPass() bool { return inc.keptPass }

// StatusesByChange says whether the latest translation looked only at the route statuses that
// may have changed (statuschanges.go), not at every route's.
func (inc *Incremental) StatusesByChange() bool { return inc.handOver.byChanges }

// Reused and Built count the route Build calls of the latest translation that were replayed and
// run.
func (inc *Incremental) Reused() int { return inc.reused }
func (inc *Incremental) Built() int  { return inc.built }

// Carried counts the routes of the latest translation whose state was the previous
// translation's (carry.go).
func (inc *Incremental) Carried() int { return inc.carried }

// ReusedStatuses counts the route statuses of the latest translation that were the previous
// translation's (statusmemo.go).
func (inc *Incremental) ReusedStatuses() int { return inc.statuses }

// memoSet is one session's view of the records: those of the previous translation, and those
// this one keeps for the next.
type memoSet struct {
	*memoIndex
	reused, built, statuses, carried int
}

// routeMemo is what one route's Build calls did, and the route as it was then: the record holds
// while the route's spec and metadata are the same (sameObject).
type routeMemo struct {
	obj      translation.Object
	validate *buildRecord
	hosts    *memoHosts
	attach   *attachRecord
	// places are the builds for listeners, by listener (a route is on a few: a slice).
	places []placeBuild
	// status is the route's status of the latest translation (statusmemo.go); rank its place
	// in the age order of translation rankEpoch (ageorder.go).
	status    *statusRecord
	rank      int
	rankEpoch uint64
	// seen is the epoch of the latest translation that used the record (memos.go).
	seen uint64
	// cur is the route's state in translation curEpoch; dupEpoch a translation whose Store held
	// the route twice (settled).
	cur                *routeState
	curEpoch, dupEpoch uint64
}

// settled says the route of rm was translated in translation epoch wholly from its records (no
// Build run, attachment replayed), and once: it was placed on the same listeners with the same
// hostnames and entries as in the previous translation (vhosts.go).
func (rm *routeMemo) settled(epoch uint64) bool {
	return rm != nil && rm.curEpoch == epoch && rm.dupEpoch != epoch && !rm.cur.fresh
}

type placeBuild struct {
	key placeID
	rec *buildRecord
}

// placeRecordOf returns the build recorded for listener k.
func (rm *routeMemo) placeRecordOf(k placeID) *buildRecord {
	for i := range rm.places {
		if rm.places[i].key == k {
			return rm.places[i].rec
		}
	}
	return nil
}

func (rm *routeMemo) setPlaceRecord(k placeID, rec *buildRecord) {
	for i := range rm.places {
		if rm.places[i].key == k {
			rm.places[i].rec = rec
			return
		}
	}
	rm.places = append(rm.places, placeBuild{key: k, rec: rec})
}

// memoHosts is the outcome of a route's hostname validation.
type memoHosts struct {
	hostnames    []string
	hasHostnames bool
	problems     []*Problem
}

// placeKey names a listener across translations: its Gateway, ListenerSet (or none), name and
// the hostname it is built for.
type placeKey struct {
	owner    string
	listener string
	hostname string
}

// placeID numbers a placeKey for the records of one world (memoIndex.places): the records name
// listeners by number, so that replaying a route's attachment compares and looks up integers,
// not three strings per listener.
type placeID int32

// placeIDOf is l's number, computed once per listener and translation.
func (t *session) placeIDOf(l *listenerState) placeID {
	if !l.pidSet {
		k := l.placeKey()
		id, ok := t.memo.places[k]
		if !ok {
			id = placeID(len(t.memo.places))
			t.memo.places[k] = id
		}
		l.pid, l.pidSet = id, true
	}
	return l.pid
}

// placeKey is computed once per listener.
func (l *listenerState) placeKey() placeKey {
	if !l.pkeySet {
		l.pkey = placeKey{listener: l.name, hostname: l.hostname}
		if l.owner != nil {
			l.pkey.owner = l.owner.key.String()
		}
		l.pkeySet = true
	}
	return l.pkey
}

// buildRecord is one Build call: what it reported, in order, and what it added to the session.
type buildRecord struct {
	effects []buildEffect
	// implemented is the validation pass's count of entries of rules neither dropped nor failed.
	implemented int
	// entries are a listener build's entries as placed (names set, dropped rules left out).
	entries []*translation.Entry
	// clusters are the clusters it named, as they were made; filterClusters those kept for
	// filters; unresolved the missing ExtensionRefs by kind.
	clusters       []*irv1.Cluster
	filterClusters []string
	unresolved     [][2]string
	// uncacheable: it read or wrote something a replay cannot reproduce.
	uncacheable bool
}

type effectKind uint8

const (
	effectDrop effectKind = iota
	effectFail
	effectUnresolved
	effectWarn
)

// buildEffect is one report of a Build to its RouteContext, after formatting.
type buildEffect struct {
	kind   effectKind
	rule   int
	field  string
	reason gwapiv1.RouteConditionReason
	msg    string
}

// routeID keys a route's record: by name when the object has a generation (the API server's
// objects), since our own status writes replace the object without changing what a translation
// reads; by address otherwise (a Store filled by hand or from files), where only the same object
// is known to be the same.
type routeID struct {
	key RouteKey
	ptr uintptr
}

func routeIDOf(k RouteKey, obj translation.Object) routeID {
	id := routeID{key: k}
	if obj.GetGeneration() == 0 {
		id.ptr = uintptr(ifacePointer(obj))
	}
	return id
}

// sameObject says whether a translation reads the same in cur as in prev, prev being an object
// of the previous Store for the same route or world identity. An object with a generation is
// unchanged while its uid, generation (the spec), labels and annotations are: a translation
// reads nothing of its status, which is what our own writes change. One without is unchanged
// only as the same object at the same resourceVersion. (The records keep prev referenced, so
// no new object can have its address.)
func sameObject(prev, cur metav1.Object) bool {
	if prev == cur {
		return prev.GetResourceVersion() == cur.GetResourceVersion()
	}
	if cur.GetGeneration() == 0 {
		return false
	}
	return prev.GetUID() == cur.GetUID() && prev.GetGeneration() == cur.GetGeneration() &&
		maps.Equal(prev.GetLabels(), cur.GetLabels()) && maps.Equal(prev.GetAnnotations(), cur.GetAnnotations())
}

// build runs st's Build for rc, or replays its record; keep says which entries are kept (the
// validation pass keeps none).
func (t *session) build(rc *routeContext, rec **buildRecord, place func(*translation.Entry) bool) (implemented int, entries []*translation.Entry) {
	st := rc.st
	if t.memo != nil && *rec != nil {
		t.memo.reused++
		return t.replay(st, *rec)
	}
	r := &buildRecord{}
	t.rec, st.rec = r, r
	st.fresh = true
	for _, e := range st.route.Build(rc) {
		if _, dropped := st.dropped[e.Rule]; !dropped {
			r.implemented++
		}
		if place != nil && place(e) {
			r.entries = append(r.entries, e)
		}
	}
	t.rec, st.rec = nil, nil
	if t.memo != nil {
		t.memo.built++
		if r.uncacheable {
			t.memo.forget(st)
		} else {
			*rec = r
		}
	}
	return r.implemented, r.entries
}

// replay applies a record to st and the session as its Build did.
func (t *session) replay(st *routeState, r *buildRecord) (int, []*translation.Entry) {
	for _, e := range r.effects {
		switch e.kind {
		case effectDrop, effectFail:
			st.invalidRule(e.rule, e.kind == effectFail, e.field, e.reason, e.msg)
		case effectUnresolved:
			st.unresolvedRef(e.field, e.reason, e.msg)
		case effectWarn:
			st.warn(e.field, e.msg)
		}
	}
	t.replaySession(r)
	return r.implemented, r.entries
}

// replaySession applies what a record added to the session (not to its route).
func (t *session) replaySession(r *buildRecord) {
	for _, c := range r.clusters {
		if c == t.lastReplayed {
			continue // many routes name the same cluster: it is in t.clusters already
		}
		if _, ok := t.clusters[c.GetName()]; !ok {
			t.clusters[c.GetName()] = t.refreshCluster(c)
		}
		t.lastReplayed = c
	}
	for _, name := range r.filterClusters {
		t.filterClusters[name] = true
	}
	for _, u := range r.unresolved {
		t.unresolvedFilter(u[0], u[1])
	}
}

// The recording hooks: the session calls them wherever a Build leaves a mark.

func (r *buildRecord) effect(e buildEffect) {
	if r != nil {
		r.effects = append(r.effects, e)
	}
}

func (t *session) recordCluster(name string) {
	if r := t.rec; r != nil {
		for _, c := range r.clusters {
			if c.GetName() == name {
				return
			}
		}
		r.clusters = append(r.clusters, t.clusters[name])
	}
}

func (t *session) recordFilterCluster(name string) {
	if r := t.rec; r != nil {
		r.filterClusters = append(r.filterClusters, name)
	}
}

func (t *session) unresolvedFilter(kind, ref string) {
	if t.unresolvedFilters[kind] == nil {
		t.unresolvedFilters[kind] = map[string]bool{}
	}
	t.unresolvedFilters[kind][ref] = true
	if r := t.rec; r != nil {
		r.unresolved = append(r.unresolved, [2]string{kind, ref})
	}
}

func (t *session) notReplayable() {
	if r := t.rec; r != nil {
		r.uncacheable = true
	}
}

// worldKey identifies the world the routes are built in: the options and every object of the
// Store but the EndpointSlices and the objects of route kinds (except those that make implicit
// parents, whose objects are world too). It is a sum, an xor and a count of the objects'
// hashes, so the order of the Store's slices does not matter.
type worldKey struct {
	opts       uint64
	sum, xor   uint64
	n          int
	registered uintptr
}

func (inc *Incremental) worldOf(s *Store, opts Options, kinds []translation.RouteKind) worldKey {
	var w worldKey
	add := func(p unsafe.Pointer, o metav1.Object) {
		var b [8]byte
		var h maphash.Hash
		h.SetSeed(inc.seed)
		if gen := o.GetGeneration(); gen != 0 {
			// As sameObject: its spec and metadata, not its status (our own writes).
			h.WriteString(string(o.GetUID()))
			binary.LittleEndian.PutUint64(b[:], uint64(gen))
			h.Write(b[:])
			hashMap(&h, o.GetLabels())
			hashMap(&h, o.GetAnnotations())
		} else {
			binary.LittleEndian.PutUint64(b[:], uint64(uintptr(p)))
			h.Write(b[:])
			h.WriteString(o.GetResourceVersion())
		}
		v := h.Sum64()
		w.sum += v
		w.xor ^= v*0x9e3779b97f4a7c15 + 1
		w.n++
	}
	addAll(add, s.GatewayClasses)
	addAll(add, s.Gateways)
	addAll(add, s.ListenerSets)
	addAll(add, s.ReferenceGrants)
	addAll(add, s.Services)
	addAll(add, s.Secrets)
	addAll(add, s.Namespaces)
	for _, cm := range s.ConfigMaps {
		// By content: a translation reads a ConfigMap's data only, and some ConfigMaps change
		// all the time (leader locks) without any CA in them.
		var h maphash.Hash
		h.SetSeed(inc.seed)
		h.WriteString(cm.Namespace + "/" + cm.Name)
		hashMap(&h, cm.Data)
		for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
			h.WriteString(k)
			h.Write(cm.BinaryData[k])
		}
		v := h.Sum64()
		w.sum += v
		w.xor ^= v*0x9e3779b97f4a7c15 + 1
		w.n++
	}
	addAll(add, s.ClusterTrustBundles)
	addAll(add, s.BackendPolicies)
	addAll(add, s.BackendTLSPolicies)
	addAll(add, s.ClientTrafficPolicies)
	addAll(add, s.GatewayParameters)
	routeKinds := map[schema.GroupKind]bool{}
	for _, k := range kinds {
		if _, implicit := k.(translation.ImplicitParentKind); !implicit {
			routeKinds[k.API().GVK.GroupKind()] = true
		}
	}
	for gk, objs := range s.Objects {
		if routeKinds[gk] {
			continue
		}
		for _, o := range objs {
			add(ifacePointer(o), o)
		}
	}
	w.registered, w.opts = inc.optionsOf(opts)
	return w
}

// optionsOf is the options' part of the world's key.
func (inc *Incremental) optionsOf(opts Options) (registered uintptr, sum uint64) {
	var h maphash.Hash
	h.SetSeed(inc.seed)
	fmt.Fprintf(&h, "%s|%t|%t|%t|%v|%x|%p|", opts.ControllerName, opts.AllowLoopbackEndpoints, opts.AssignsAddresses,
		opts.Routability, opts.StatusAddresses, opts.SessionKey, opts.Documents)
	for _, k := range slices.Sorted(maps.Keys(opts.KindSettings)) {
		fmt.Fprintf(&h, "%s=%s|", k, opts.KindSettings[k])
	}
	for _, k := range slices.SortedFunc(maps.Keys(opts.GatewayAddresses), compareNN) {
		fmt.Fprintf(&h, "%s=%s|", k, opts.GatewayAddresses[k])
	}
	for _, k := range slices.SortedFunc(maps.Keys(opts.Provisioned), compareNN) {
		p := opts.Provisioned[k]
		fmt.Fprintf(&h, "%s=", k)
		if p != nil {
			fmt.Fprintf(&h, "%v", *p)
		}
		h.WriteString("|")
	}
	return uintptr(unsafe.Pointer(opts.Registry)), h.Sum64()
}

func addAll[T any, P interface {
	*T
	metav1.Object
}](add func(unsafe.Pointer, metav1.Object), objs []P) {
	for _, o := range objs {
		add(unsafe.Pointer(o), o)
	}
}

// ifacePointer is the address an interface holding a pointer points at.
func ifacePointer(o translation.Object) unsafe.Pointer {
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&o))[1]
}

func compareNN(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		return strings.Compare(a.Namespace, b.Namespace)
	}
	return strings.Compare(a.Name, b.Name)
}

// hashMap writes a string map into h, in key order.
func hashMap(h *maphash.Hash, m map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(m[k])
		h.WriteByte(0)
	}
	h.WriteByte(1)
}
