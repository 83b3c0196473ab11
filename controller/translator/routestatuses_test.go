package translator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestRouteStatusesFollowAMap edits RouteStatuses by random sets and removals, a few per step
// as a translation does, against a plain map: after every step the new value holds what the map
// holds (Get, Lookup, Len, All, Map), and every earlier value still holds what the map held
// then, though later edits shared its base and overlay. It fails unless the overlay was folded
// into a new base at least once.
func TestRouteStatusesFollowAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	key := func(i int) RouteKey {
		return RouteKey{Group: "g", Kind: "HTTPRoute", Namespace: "ns", Name: fmt.Sprint(i)}
	}
	type version struct {
		rs   RouteStatuses
		want map[RouteKey]*gwapiv1.RouteStatus
	}
	want := map[RouteKey]*gwapiv1.RouteStatus{}
	for i := range 200 {
		want[key(i)] = &gwapiv1.RouteStatus{}
	}
	cur := routeStatusesOf(maps.Clone(want))
	var versions []version
	folds := 0
	for step := range 600 {
		e := editRouteStatuses(cur)
		for range 1 + rng.IntN(4) {
			k := key(rng.IntN(260)) // some keys never had a status
			if rng.IntN(3) == 0 {
				e.remove(k)
				delete(want, k)
			} else {
				st := &gwapiv1.RouteStatus{}
				e.set(k, st)
				want[k] = st
			}
		}
		next := e.done()
		if len(next.over) == 0 && len(cur.over) > 0 {
			folds++
		}
		cur = next
		versions = append(versions, version{cur, maps.Clone(want)})
		if msg := routeStatusesDiffer(cur, want, 260, key); msg != "" {
			t.Fatalf("step %d: %s", step, msg)
		}
	}
	for i, v := range versions {
		if msg := routeStatusesDiffer(v.rs, v.want, 260, key); msg != "" {
			t.Fatalf("version %d changed after later edits: %s", i, msg)
		}
	}
	if folds == 0 {
		t.Errorf("the overlay was never folded into a new base")
	}
}

func routeStatusesDiffer(rs RouteStatuses, want map[RouteKey]*gwapiv1.RouteStatus, keys int, key func(int) RouteKey) string {
	if rs.Len() != len(want) {
		return fmt.Sprintf("Len %d, want %d", rs.Len(), len(want))
	}
	for i := range keys {
		k := key(i)
		st, ok := rs.Lookup(k)
		w, wok := want[k]
		if st != w || ok != wok || rs.Get(k) != w {
			return fmt.Sprintf("%v: %p %t, want %p %t", k, st, ok, w, wok)
		}
	}
	n := 0
	for k, st := range rs.All() {
		n++
		if want[k] != st {
			return fmt.Sprintf("All yields %v %p, want %p", k, st, want[k])
		}
	}
	if n != len(want) || !maps.Equal(rs.Map(), want) {
		return fmt.Sprintf("All yields %d, Map %d entries; want %d", n, len(rs.Map()), len(want))
	}
	return ""
}
