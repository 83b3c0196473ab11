package translator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// objectRoute is a route that is only its object: all the age order reads.
type objectRoute struct{ obj *gwapiv1.HTTPRoute }

func (r objectRoute) Object() translation.Object                          { return r.obj }
func (r objectRoute) ParentRefs() []gwapiv1.ParentReference               { return nil }
func (r objectRoute) Hostnames() []gwapiv1.Hostname                       { return nil }
func (r objectRoute) Build(translation.RouteContext) []*translation.Entry { return nil }

// TestAgeOrderEqualsSort holds the kept age order to a stable sort of the Store's order after
// random creates, deletes, renewals (a new object of the same route) and updates, with few
// distinct creation times (ties broken by name) and, now and then, two objects of one name in
// the Store (the merge must give up and sort).
func TestAgeOrderEqualsSort(t *testing.T) {
	gk := schema.GroupKind{Group: gwapiv1.GroupName, Kind: "HTTPRoute"}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 3))
			memos := newMemoIndex()
			var order ageOrder
			world := map[string]*gwapiv1.HTTPRoute{}
			var dup *gwapiv1.HTTPRoute // a second object of a name in world, for one step
			gen := int64(0)
			merged := 0
			for step := range 300 {
				name := fmt.Sprintf("r%d", rng.IntN(60))
				gen++
				switch cur, ok := world[name]; {
				case !ok:
					world[name] = &gwapiv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 1,
						UID: types.UID(fmt.Sprintf("uid-%d", gen)), ResourceVersion: fmt.Sprint(gen),
						CreationTimestamp: metav1.NewTime(time.Unix(int64(rng.IntN(4)), 0))}}
				case rng.IntN(4) == 0:
					delete(world, name)
				case rng.IntN(2) == 0:
					next := cur.DeepCopy() // renewed: the record holds
					next.ResourceVersion = fmt.Sprint(gen)
					world[name] = next
				case rng.IntN(8) == 0:
					dup = cur.DeepCopy()
					dup.ResourceVersion = fmt.Sprint(gen)
				default:
					next := cur.DeepCopy() // updated: a new record
					next.ResourceVersion, next.Generation = fmt.Sprint(gen), cur.Generation+1
					world[name] = next
				}
				objs := make([]*gwapiv1.HTTPRoute, 0, len(world)+1)
				for _, o := range world {
					objs = append(objs, o)
				}
				if dup != nil {
					objs = append(objs, dup)
					dup = nil
				}
				memos.epoch++
				memos.live = 0
				sts := make([]*routeState, len(objs))
				for i, o := range objs {
					sts[i] = &routeState{route: objectRoute{o}, meta: o, key: RouteKey{Kind: "HTTPRoute", Namespace: o.Namespace, Name: o.Name}}
					sts[i].memo = memos.memoOf(sts[i])
				}
				want := slices.Clone(sts)
				sortByAge(want)
				if order.sort(gk, sts, memos.epoch) {
					merged++
				}
				memos.sweep()
				if !slices.Equal(sts, want) {
					t.Fatalf("step %d: kept order differs from a sort", step)
				}
			}
			if merged < 200 {
				t.Fatalf("only %d of 300 steps merged into the kept order", merged)
			}
		})
	}
}
