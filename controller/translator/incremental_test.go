package translator_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// TestIncrementalEqualsTranslate is the property an Incremental promises: after every step of a
// random sequence of creates, updates and deletes, its translation equals a full translation of
// the same Store: the same snapshot (version and content), the same statuses of every kind, the
// same problems and warnings. The objects are those of every example and translator golden
// input (every kind the Store holds: classes, Gateways, ListenerSets, every route kind, Services,
// EndpointSlices, ReferenceGrants, Secrets, ConfigMaps, Namespaces, policies, filter objects,
// parameters); an object of one identity in several files gives that identity several versions,
// so an update changes its content, and an update may also be a new version of equal content.
func TestIncrementalEqualsTranslate(t *testing.T) {
	reg := core.Freeze()
	pool := loadPool(t, reg)
	if len(pool.ids) < 50 {
		t.Fatalf("only %d distinct objects in the pool", len(pool.ids))
	}
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := translator.Options{Registry: reg, AllowLoopbackEndpoints: true, Now: func() metav1.Time { return now },
		SessionKey: []byte("property test key")}
	steps := 400
	if testing.Short() {
		steps = 100
	}
	statusesReused, carried := 0, 0 // over all seeds: in some, no route ever attaches
	handedOver := 0                 // steps whose route status changes were known
	usedChanges := map[changeMode]int{}
	byChanges := 0  // translations that looked at the statuses that may have changed only
	keptPasses := 0 // translations whose route pass was the kept set's (keep.go)
	for _, run := range []struct {
		mode  changeMode
		seeds uint64
	}{{noChanges, 6}, {exactChanges, 6}, {supersetChanges, 3}, {routeChurn, 2}} {
		for seed := range run.seeds {
			t.Run(fmt.Sprintf("%s/seed=%d", run.mode, seed), func(t *testing.T) {
				n := steps
				if run.mode == routeChurn {
					n = steps / 2 // its world is the whole pool: each step's full translation costs more
				}
				r := sequence(t, pool, opts, &now, run.mode, seed, n)
				statusesReused += r.statuses
				carried += r.carried
				handedOver += r.handedOver
				usedChanges[run.mode] += r.usedChanges
				byChanges += r.statusesByChange
				keptPasses += r.keptPasses
			})
		}
	}
	if carried == 0 {
		t.Errorf("no route state was ever carried over: the test does not exercise carry.go")
	}
	t.Logf("%d route states carried over", carried)
	if statusesReused == 0 {
		t.Errorf("no route status was ever reused: the test does not exercise statusmemo.go")
	}
	if handedOver == 0 {
		t.Errorf("no Result ever knew its route status changes: the test does not exercise statuschanges.go")
	}
	t.Logf("%d route status hand-overs by changes", handedOver)
	if usedChanges[noChanges] != 0 || usedChanges[exactChanges] == 0 || usedChanges[supersetChanges] == 0 {
		t.Errorf("translations that used their Changes, by mode: %v; want none without and some with", usedChanges)
	}
	t.Logf("translations that used their Changes: %v", usedChanges)
	if byChanges == 0 {
		t.Errorf("no translation looked at the changed routes' statuses only: the test does not exercise statusHandOver.byChange")
	}
	t.Logf("translations whose statuses were looked at by change: %d", byChanges)
	if keptPasses == 0 {
		t.Errorf("no translation patched the kept route pass: the test does not exercise keep.go")
	}
	t.Logf("translations whose route pass was the kept set's: %d", keptPasses)
}

// changeMode is what a sequence tells the Incremental about each step's change.
type changeMode string

const (
	noChanges       changeMode = "none"     // Translate: the Incremental finds out
	exactChanges    changeMode = "exact"    // the keys the informers would report
	supersetChanges changeMode = "superset" // those and more, unchanged or absent
	// routeChurn: every object of the pool but the routes first, then mostly route changes
	// (and some EndpointSlice ones) told exactly, each Store sharing the lists of the kinds
	// that did not change with the one before, as the controller's patched Store does: long
	// runs of translations from the kept route pass (keep.go), which the other modes, whose
	// steps change any kind, rarely make.
	routeChurn changeMode = "churn"
)

type sequenceStats struct{ statuses, carried, handedOver, usedChanges, statusesByChange, keptPasses int }

// sequence runs one random sequence of steps and checks every translation against a full one.
func sequence(t *testing.T, pool *objectPool, opts translator.Options, now *metav1.Time, mode changeMode, seed uint64, steps int) sequenceStats {
	var out sequenceStats
	rng := rand.New(rand.NewPCG(seed, 17))
	world := map[objectID]runtime.Object{}
	inc := translator.NewIncremental()
	kinds := routeKinds(opts.Registry)
	rv := 0
	reused := 0
	var earlier []*translator.Result // the latest two Results, oldest first
	var prev *translator.Store
	if mode == routeChurn {
		for _, id := range pool.ids {
			if !kinds[id.gk] {
				world[id] = pool.version(rng, id, &rv)
			}
		}
	}
	for step := range steps {
		// Grow towards about half the pool, then churn.
		id := pool.ids[rng.IntN(len(pool.ids))]
		for mode == routeChurn && step > 0 && !kinds[id.gk] && (id.gk != kindOf(&discoveryv1.EndpointSlice{}) || rng.IntN(4) != 0) {
			id = pool.ids[rng.IntN(len(pool.ids))]
		}
		cur, present := world[id]
		var what string
		switch {
		case !present:
			world[id], what = pool.version(rng, id, &rv), "create"
		case rng.IntN(3) == 0:
			delete(world, id)
			what = "delete"
		case rng.IntN(2) == 0:
			// A new object of the same content and generation: what our own status
			// write (or a relist) looks like to the informers.
			world[id], what = renew(cur, &rv), "touch"
		default:
			// A new version: the API server bumps the generation of a spec change.
			next := pool.version(rng, id, &rv)
			bumpGeneration(next, cur)
			world[id], what = next, "update"
		}
		if rng.IntN(3) == 0 {
			// The clock moves on: a reused route status keeps its earlier time (statusmemo.go).
			*now = metav1.NewTime(now.Add(time.Second))
		}
		store := storeOf(world)
		if mode == routeChurn && prev != nil {
			shareUnchanged(store, prev, id.gk)
		}
		var got *translator.Result
		if mode == noChanges {
			got = inc.Translate(context.Background(), store, opts)
		} else {
			ch := informerChanges(kinds, id, what, world)
			if mode == routeChurn && step == 0 {
				ch.Other = true // the world came
			}
			if mode == supersetChanges {
				addUnchanged(rng, ch, kinds, pool, world)
			}
			ch.Since = prev
			got = inc.TranslateChanges(context.Background(), store, opts, ch)
		}
		prev = store
		if inc.UsedChanges() {
			out.usedChanges++
		}
		if inc.StatusesByChange() {
			out.statusesByChange++
		}
		if inc.KeptPass() {
			out.keptPasses++
		}
		want := translator.Translate(context.Background(), store, opts)
		reused += inc.Reused()
		out.statuses += inc.ReusedStatuses()
		out.carried += inc.Carried()
		if msg := diffResults(got, want); msg != "" {
			t.Fatalf("step %d (%s %v, %d objects, used changes %t): incremental differs from full: %s", step, what, id, len(world), inc.UsedChanges(), msg)
		}
		for _, since := range earlier {
			known, msg := routeChangesCover(got, since)
			if msg != "" {
				t.Fatalf("step %d (%s %v, %d objects): route status changes since %d results before: %s",
					step, what, id, len(world), len(earlier), msg)
			}
			if known {
				out.handedOver++
			}
		}
		earlier = append(earlier, got)
		if len(earlier) > 2 {
			earlier = earlier[1:]
		}
	}
	if reused == 0 {
		t.Errorf("no Build was ever replayed: the test does not exercise reuse")
	}
	t.Logf("%d Build calls replayed, %d route statuses reused, %d translations used their changes over %d steps", reused, out.statuses, out.usedChanges, steps)
	return out
}

// shareUnchanged gives s the lists of prev for every kind but changed, as the controller's
// patched Store does (storepatch.go): the same objects, in the same list.
func shareUnchanged(s, prev *translator.Store, changed schema.GroupKind) {
	v, pv := reflect.ValueOf(s).Elem(), reflect.ValueOf(prev).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.Kind() == reflect.Slice && kindOf(reflect.Zero(f.Type().Elem()).Interface().(runtime.Object)) != changed {
			f.Set(pv.Field(i))
		}
	}
	for gk := range s.Objects {
		if gk != changed {
			s.Objects[gk] = prev.Objects[gk]
		}
	}
	for gk, objs := range prev.Objects {
		if _, ok := s.Objects[gk]; !ok && gk != changed {
			s.Add(gk, objs...)
		}
	}
}

// routeKinds are the group kinds of the registry's route kinds that are not implicit parents:
// the kinds whose changes Changes.Routes lists.
func routeKinds(reg *core.Registry) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, k := range translation.RouteKinds(reg) {
		if _, implicit := k.(translation.ImplicitParentKind); !implicit {
			out[k.API().GVK.GroupKind()] = true
		}
	}
	return out
}

// informerChanges are the Changes the controller's informers would report for one step: the
// key of a route object created, deleted, updated or touched (a new object of the same
// content: what a status write looks like, whose key the route informers record so that the
// next Store takes the new object), nothing for an EndpointSlice, and Other for any other
// kind (its touches included, which some of those informers ignore: a superset is allowed).
func informerChanges(kinds map[schema.GroupKind]bool, id objectID, what string, world map[objectID]runtime.Object) *translator.Changes {
	ch := &translator.Changes{}
	switch {
	case kinds[id.gk]:
		var obj translation.Object
		if o, ok := world[id]; ok {
			obj = o.(translation.Object)
		}
		ch.Routes = map[schema.GroupKind]map[types.NamespacedName]translation.Object{
			id.gk: {{Namespace: id.namespace, Name: id.name}: obj}}
	case id.gk == kindOf(&discoveryv1.EndpointSlice{}):
	default:
		ch.Other = true
	}
	return ch
}

// addUnchanged adds to ch a few route keys that did not change: present ones with their
// current object, and absent ones.
func addUnchanged(rng *rand.Rand, ch *translator.Changes, kinds map[schema.GroupKind]bool, pool *objectPool, world map[objectID]runtime.Object) {
	for range 3 {
		id := pool.ids[rng.IntN(len(pool.ids))]
		if !kinds[id.gk] {
			continue
		}
		if ch.Routes == nil {
			ch.Routes = map[schema.GroupKind]map[types.NamespacedName]translation.Object{}
		}
		if ch.Routes[id.gk] == nil {
			ch.Routes[id.gk] = map[types.NamespacedName]translation.Object{}
		}
		key := types.NamespacedName{Namespace: id.namespace, Name: id.name}
		if _, listed := ch.Routes[id.gk][key]; listed {
			continue
		}
		var obj translation.Object
		if o, ok := world[id]; ok {
			obj = o.(translation.Object)
		}
		ch.Routes[id.gk][key] = obj
	}
}

// routeChangesCover checks got.RouteStatusChanges(since): when known, every key whose status
// differs between the two Results' Routes (another object, or in one only) must be listed.
func routeChangesCover(got, since *translator.Result) (known bool, msg string) {
	keys, ok := got.RouteStatusChanges(since)
	if !ok {
		return false, ""
	}
	listed := map[translator.RouteKey]bool{}
	for _, k := range keys {
		listed[k] = true
	}
	for k, s := range got.Routes.All() {
		if since.Routes.Get(k) != s && !listed[k] {
			return true, fmt.Sprintf("%v changed (or came) and is not listed", k)
		}
	}
	for k := range since.Routes.All() {
		if _, ok := got.Routes.Lookup(k); !ok && !listed[k] {
			return true, fmt.Sprintf("%v left and is not listed", k)
		}
	}
	return true, ""
}

type objectID struct {
	gk        schema.GroupKind
	namespace string
	name      string
}

// objectPool holds every version of every object identity found in the inputs.
type objectPool struct {
	ids      []objectID
	versions map[objectID][]runtime.Object
}

func loadPool(t *testing.T, reg *core.Registry) *objectPool {
	t.Helper()
	var inputs []string
	for _, g := range []string{"../../examples/*", "testdata/policies/*.in.yaml", "../../modules/*/translate/testdata/*.in.yaml",
		// Layer-4 routes shadowing each other on one listener, gRPC beside HTTP.
		"../../modules/tlsroute/translate/testdata/l4.yaml", "../../modules/grpcroute/translate/testdata/grpc.yaml"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, m...)
	}
	p := &objectPool{versions: map[objectID][]runtime.Object{}}
	for _, in := range inputs {
		if fi, err := os.Stat(in); err != nil || (!fi.IsDir() && filepath.Ext(in) != ".yaml") {
			continue
		}
		loaded, err := standalone.Load(context.Background(), in, reg)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		each(loaded.Store, func(gk schema.GroupKind, o runtime.Object) {
			m, _ := meta.Accessor(o)
			id := objectID{gk, m.GetNamespace(), m.GetName()}
			if _, ok := p.versions[id]; !ok {
				p.ids = append(p.ids, id)
			}
			p.versions[id] = append(p.versions[id], o)
		})
	}
	sort.Slice(p.ids, func(i, j int) bool { return fmt.Sprint(p.ids[i]) < fmt.Sprint(p.ids[j]) })
	return p
}

// version is a fresh copy of one of id's versions, with a new resourceVersion.
func (p *objectPool) version(rng *rand.Rand, id objectID, rv *int) runtime.Object {
	vs := p.versions[id]
	return renew(vs[rng.IntN(len(vs))], rv)
}

// renew copies o as an informer delivers an update: a new object with a new resourceVersion.
func renew(o runtime.Object, rv *int) runtime.Object {
	*rv++
	cp := o.DeepCopyObject()
	m, _ := meta.Accessor(cp)
	m.SetResourceVersion(fmt.Sprint(*rv))
	return cp
}

func storeOf(world map[objectID]runtime.Object) *translator.Store {
	s := &translator.Store{}
	ids := make([]objectID, 0, len(world))
	for id := range world {
		ids = append(ids, id)
	}
	// The informers' lists come in no particular order: neither may the Store's.
	rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	for _, id := range ids {
		putInto(s, id.gk, world[id])
	}
	return s
}

// each calls f with every object of s and its group kind (kindOf for the typed fields).
func each(s *translator.Store, f func(schema.GroupKind, runtime.Object)) {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		field := v.Field(i)
		if field.Kind() != reflect.Slice {
			continue
		}
		for j := range field.Len() {
			o := field.Index(j).Interface().(runtime.Object)
			f(kindOf(o), o)
		}
	}
	for gk, objs := range s.Objects {
		for _, o := range objs {
			f(gk, o.(runtime.Object))
		}
	}
}

// kindOf names a typed object of one of the Store's typed fields by its Go type.
func kindOf(o runtime.Object) schema.GroupKind {
	return schema.GroupKind{Group: "store", Kind: reflect.TypeOf(o).Elem().String()}
}

// putInto adds o to the Store's field of its Go type, or to Objects under gk.
func putInto(s *translator.Store, gk schema.GroupKind, o runtime.Object) {
	if gk.Group != "store" {
		s.Add(gk, o.(translation.Object))
		return
	}
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		field := v.Field(i)
		if field.Kind() == reflect.Slice && field.Type().Elem() == reflect.TypeOf(o) {
			field.Set(reflect.Append(field, reflect.ValueOf(o)))
			return
		}
	}
	panic(fmt.Sprintf("no Store field holds %T", o))
}

// diffResults says how two translations differ, "" when they do not.
func diffResults(got, want *translator.Result) string {
	if got.Snapshot.GetVersion() != want.Snapshot.GetVersion() {
		return fmt.Sprintf("snapshot version %s, want %s", got.Snapshot.GetVersion(), want.Snapshot.GetVersion())
	}
	if !proto.Equal(got.Snapshot, want.Snapshot) {
		return "snapshot content differs"
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"GatewayClasses", got.GatewayClasses, want.GatewayClasses},
		{"Gateways", got.Gateways, want.Gateways},
		{"ListenerSets", got.ListenerSets, want.ListenerSets},
		{"Routes", routesAt(got.Routes.Map()), routesAt(want.Routes.Map())},
		{"Policies", got.Policies, want.Policies},
		{"Problems", got.Problems, want.Problems},
		{"Warnings", got.Warnings, want.Warnings},
		{"UnresolvedFilters", got.UnresolvedFilters, want.UnresolvedFilters},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			return c.what + ": " + firstDifference(reflect.ValueOf(c.got), reflect.ValueOf(c.want))
		}
	}
	return laterTransition(got.Routes.Map(), want.Routes.Map())
}

// routesAt is route statuses without their conditions' lastTransitionTime, which an Incremental's
// reused statuses keep from the translation that computed them (statusmemo.go).
func routesAt(rs map[translator.RouteKey]*gwapiv1.RouteStatus) map[translator.RouteKey]*gwapiv1.RouteStatus {
	out := make(map[translator.RouteKey]*gwapiv1.RouteStatus, len(rs))
	for k, s := range rs {
		s = s.DeepCopy()
		for i := range s.Parents {
			for j := range s.Parents[i].Conditions {
				s.Parents[i].Conditions[j].LastTransitionTime = metav1.Time{}
			}
		}
		out[k] = s
	}
	return out
}

// laterTransition names a route condition of got whose lastTransitionTime is later than the
// same condition's in want (a full translation, stamped with the translation's time): a reused
// status may only be older. got and want are otherwise equal (routesAt).
func laterTransition(got, want map[translator.RouteKey]*gwapiv1.RouteStatus) string {
	for k, g := range got {
		w := want[k]
		for i := range g.Parents {
			for j, c := range g.Parents[i].Conditions {
				if wt := w.Parents[i].Conditions[j].LastTransitionTime; wt.Before(&c.LastTransitionTime) {
					return fmt.Sprintf("Routes: %v %s lastTransitionTime %v, later than the translation's %v", k, c.Type, c.LastTransitionTime, wt)
				}
			}
		}
	}
	return ""
}

// firstDifference names the first key whose values differ when got and want are maps.
func firstDifference(got, want reflect.Value) string {
	if got.Kind() != reflect.Map {
		return fmt.Sprintf("\n got  %+v\n want %+v", got.Interface(), want.Interface())
	}
	for _, k := range want.MapKeys() {
		g, w := got.MapIndex(k), want.MapIndex(k)
		if !g.IsValid() {
			return fmt.Sprintf("%v missing", k.Interface())
		}
		if !reflect.DeepEqual(g.Interface(), w.Interface()) {
			return fmt.Sprintf("%v:\n got  %+v\n want %+v", k.Interface(), reflect.Indirect(g).Interface(), reflect.Indirect(w).Interface())
		}
	}
	return fmt.Sprintf("%d entries, want %d", got.Len(), want.Len())
}

// TestSealerEqualsSeal: sealing a snapshot with remembered encodings gives irv1.Seal's version,
// for the snapshot of every example and golden input, sealed twice (the second time from the
// remembered encodings).
func TestSealerEqualsSeal(t *testing.T) {
	reg := core.Freeze()
	p := loadPool(t, reg)
	world := map[objectID]runtime.Object{}
	rv := 0
	for _, id := range p.ids {
		world[id] = p.version(rand.New(rand.NewPCG(1, 2)), id, &rv)
	}
	inc := translator.NewIncremental()
	opts := translator.Options{Registry: reg, AllowLoopbackEndpoints: true}
	for range 2 {
		res := inc.Translate(context.Background(), storeOf(world), opts)
		if len(res.Snapshot.GetListeners()) == 0 {
			t.Fatal("an empty snapshot proves nothing")
		}
		want := proto.Clone(res.Snapshot).(*irv1.Snapshot)
		if err := irv1.Seal(want); err != nil {
			t.Fatal(err)
		}
		if res.Snapshot.GetVersion() != want.GetVersion() {
			t.Fatalf("sealer gives %s, irv1.Seal %s", res.Snapshot.GetVersion(), want.GetVersion())
		}
	}
}

// bumpGeneration gives next a generation above prev's, as the API server does for a spec change,
// when the objects carry one at all (objects loaded from files may not); the uid stays.
func bumpGeneration(next, prev runtime.Object) {
	n, _ := meta.Accessor(next)
	p, _ := meta.Accessor(prev)
	n.SetUID(p.GetUID())
	if p.GetGeneration() != 0 || n.GetGeneration() != 0 {
		n.SetGeneration(max(p.GetGeneration(), n.GetGeneration()) + 1)
	}
}
