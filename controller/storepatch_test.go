package controller

import (
	"fmt"
	"math/rand/v2"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// TestPatchedStoreFollowsTheCache: a Store patched by the keys of random adds, updates and
// deletes in a route kind's cache holds exactly the cache's objects (the very ones), as a
// listing would, leaves the Store it was patched from as it was, and reports each changed key's
// object (nil when gone).
func TestPatchedStoreFollowsTheCache(t *testing.T) {
	gk := schema.GroupKind{Group: gwapiv1.GroupName, Kind: "HTTPRoute"}
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &gwapiv1.HTTPRoute{}, 0, cache.Indexers{})
	mk := &moduleKind{gk: gk, informer: inf, keyed: true, started: make(chan struct{})}
	close(mk.started)
	w := &watch{kinds: []*moduleKind{mk}}
	idx := inf.GetIndexer()
	rng := rand.New(rand.NewPCG(1, 2))
	prev := &translator.Store{}
	w.latest = prev
	rv := 0
	for step := range 300 {
		keys := map[types.NamespacedName]struct{}{}
		for range 1 + rng.IntN(4) {
			key := types.NamespacedName{Namespace: fmt.Sprintf("ns%d", rng.IntN(3)), Name: fmt.Sprintf("r%d", rng.IntN(40))}
			cur, exists, _ := idx.GetByKey(key.Namespace + "/" + key.Name)
			rv++
			switch {
			case exists && rng.IntN(3) == 0:
				if err := idx.Delete(cur); err != nil {
					t.Fatal(err)
				}
			default:
				r := &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: fmt.Sprint(rv)}}
				if err := idx.Update(r); err != nil {
					t.Fatal(err)
				}
			}
			keys[key] = struct{}{}
		}
		before := append([]translation.Object(nil), prev.Objects[gk]...)
		next, changed, patched, err := w.nextStore(prev, changeRoutes, map[schema.GroupKind]map[types.NamespacedName]struct{}{gk: keys})
		if err != nil || !patched {
			t.Fatalf("step %d: patched %t, %v", step, patched, err)
		}
		if len(prev.Objects[gk]) != len(before) {
			t.Fatalf("step %d: the previous Store changed", step)
		}
		for i := range before {
			if prev.Objects[gk][i] != before[i] {
				t.Fatalf("step %d: the previous Store changed", step)
			}
		}
		got := map[string]translation.Object{}
		for _, o := range next.Objects[gk] {
			k := o.GetNamespace() + "/" + o.GetName()
			if got[k] != nil {
				t.Fatalf("step %d: %s twice", step, k)
			}
			got[k] = o
		}
		list := idx.List()
		if len(list) != len(got) {
			t.Fatalf("step %d: %d objects, the cache holds %d", step, len(got), len(list))
		}
		for _, o := range list {
			r := o.(*gwapiv1.HTTPRoute)
			if got[r.Namespace+"/"+r.Name] != translation.Object(r) {
				t.Fatalf("step %d: %s/%s is not the cache's object", step, r.Namespace, r.Name)
			}
		}
		for key := range keys {
			o, ok := changed[gk][key]
			if !ok {
				t.Fatalf("step %d: %v not reported", step, key)
			}
			if want := got[key.Namespace+"/"+key.Name]; o != want {
				t.Fatalf("step %d: %v reported as %v, the Store holds %v", step, key, o, want)
			}
		}
		if w.latest != next {
			t.Fatalf("step %d: the watch's latest Store is not the one it made", step)
		}
		prev = next
	}
}
