package status

import (
	"maps"
	"slices"
	"testing"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestDesireRouteChanges: a Desire with RouteChanges updates the desired route statuses in
// place and queues exactly the routes whose status differs (lastTransitionTime aside) or that
// left, as a Desire of the whole map would.
func TestDesireRouteChanges(t *testing.T) {
	key := func(name string) Key {
		return Key{Kind: "HTTPRoute", NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	route := func(reason string, at int) *gwapiv1.RouteStatus {
		ts := t0
		if at == 1 {
			ts = t1
		}
		return &gwapiv1.RouteStatus{Parents: []gwapiv1.RouteParentStatus{{ControllerName: ours,
			ParentRef: gwapiv1.ParentReference{Name: "gw"}, Conditions: []metav1.Condition{cond("Accepted", "True", reason, 1, ts)}}}}
	}
	drain := func(w *Writer) []string {
		var out []string
		for w.queue.Len() > 0 {
			k, _ := w.queue.Get()
			out = append(out, k.Name)
			w.queue.Done(k)
		}
		slices.Sort(out)
		return out
	}
	for _, first := range []bool{false, true} {
		w := NewWriter(Options{Log: zap.NewNop(), ControllerName: ours})
		if first {
			// The first Desire of a writer with changes only: they are the whole desired state.
			w.Desire(Desired{RouteChanges: map[Key]*gwapiv1.RouteStatus{key("a"): route("Accepted", 0), key("gone"): nil}})
			if got := drain(w); !slices.Equal(got, []string{"a"}) {
				t.Errorf("first Desire by changes queued %v, want [a]", got)
			}
			if _, ok := w.routes[key("gone")]; ok || len(w.routes) != 1 {
				t.Errorf("first Desire by changes keeps %v", slices.Collect(maps.Keys(w.routes)))
			}
		}
		w.Desire(Desired{Routes: map[Key]*gwapiv1.RouteStatus{key("a"): route("Accepted", 0), key("b"): route("Accepted", 0),
			key("c"): route("Accepted", 0)}})
		drain(w)

		same := route("Accepted", 1) // a new object saying the same, but for lastTransitionTime
		changed := route("Conflicted", 0)
		added := route("Accepted", 0)
		w.Desire(Desired{RouteChanges: map[Key]*gwapiv1.RouteStatus{key("a"): same, key("b"): changed, key("c"): nil, key("d"): added}})
		if got := drain(w); !slices.Equal(got, []string{"b", "c", "d"}) {
			t.Errorf("queued %v, want [b c d]", got)
		}
		want := map[Key]*gwapiv1.RouteStatus{key("a"): same, key("b"): changed, key("d"): added}
		if !maps.Equal(w.routes, want) {
			t.Errorf("desired routes %v, want %v", w.routes, want)
		}
		w.Desire(Desired{RouteChanges: map[Key]*gwapiv1.RouteStatus{}})
		if got := drain(w); len(got) != 0 || !maps.Equal(w.routes, want) {
			t.Errorf("no changes queued %v and left %d routes", got, len(w.routes))
		}
	}
}
