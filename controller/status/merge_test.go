package status

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Hour))
)

func cond(typ string, st metav1.ConditionStatus, reason string, gen int64, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: reason, ObservedGeneration: gen, LastTransitionTime: at}
}

func TestMergeConditions(t *testing.T) {
	tests := []struct {
		name     string
		live     []metav1.Condition
		desired  metav1.Condition
		wantTime metav1.Time
	}{
		{"new condition keeps its time", nil, cond("Accepted", "True", "Accepted", 1, t1), t1},
		{"same status keeps the live time", []metav1.Condition{cond("Accepted", "True", "Accepted", 1, t0)},
			cond("Accepted", "True", "Accepted", 2, t1), t0},
		{"new reason, same status keeps the live time", []metav1.Condition{cond("Accepted", "True", "Accepted", 1, t0)},
			cond("Accepted", "True", "Other", 1, t1), t0},
		{"changed status takes the new time", []metav1.Condition{cond("Accepted", "True", "Accepted", 1, t0)},
			cond("Accepted", "False", "Invalid", 2, t1), t1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mergeConditions(tc.live, []metav1.Condition{tc.desired})
			if !got[0].LastTransitionTime.Equal(&tc.wantTime) {
				t.Fatalf("lastTransitionTime = %v, want %v", got[0].LastTransitionTime, tc.wantTime)
			}
			if got[0].Reason != tc.desired.Reason || got[0].ObservedGeneration != tc.desired.ObservedGeneration {
				t.Fatalf("merged condition lost the desired fields: %+v", got[0])
			}
		})
	}
}

// Conditions of another domain's type stay as they are; ours and the Gateway API's that the
// translation no longer sets go.
func TestMergeConditionsKeepsForeign(t *testing.T) {
	stale := cond("conformance.gateway.networking.k8s.io/StaleCondition", "True", "Seeded", 1, t0)
	live := []metav1.Condition{
		cond("Accepted", "True", "Accepted", 1, t0),
		stale,
		cond("ResolvedRefs", "False", "InvalidCertificateRef", 1, t0),
		cond(ConditionModulesAvailable, "False", "Missing", 1, t0),
	}
	got := mergeConditions(live, []metav1.Condition{cond("Accepted", "True", "Accepted", 2, t1)})
	if len(got) != 2 || got[0].Type != "Accepted" || got[0].ObservedGeneration != 2 {
		t.Fatalf("merged = %+v, want Accepted (generation 2) and the foreign condition", got)
	}
	if got[1] != stale {
		t.Fatalf("foreign condition modified: %+v, want %+v", got[1], stale)
	}
	// A foreign type the translation sets itself is the translation's.
	got = mergeConditions(live, []metav1.Condition{cond(stale.Type, "False", "Mine", 2, t1)})
	if len(got) != 1 || got[0].Reason != "Mine" {
		t.Fatalf("merged = %+v, want the desired condition only", got)
	}
	if got := mergeConditions(live, nil); got != nil {
		t.Fatalf("nil desired: %+v", got)
	}
}

func TestEqualIgnoresTransitionTime(t *testing.T) {
	a := gwapiv1.GatewayClassStatus{Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, t0)}}
	b := gwapiv1.GatewayClassStatus{Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 1, t1)}}
	if !Equal(a, b) {
		t.Fatal("statuses differing only in lastTransitionTime are not Equal")
	}
	b.Conditions[0].ObservedGeneration = 2
	if Equal(a, b) {
		t.Fatal("statuses differing in observedGeneration are Equal")
	}
	if !Equal(gwapiv1.GatewayStatus{}, gwapiv1.GatewayStatus{Listeners: []gwapiv1.ListenerStatus{}}) {
		t.Fatal("nil and empty slices differ")
	}
}

func gwStatus(gen int64, programmed metav1.ConditionStatus) *gwapiv1.GatewayStatus {
	return &gwapiv1.GatewayStatus{
		Conditions: []metav1.Condition{
			cond("Accepted", "True", "Accepted", gen, t1),
			cond("Programmed", programmed, "Programmed", gen, t1),
		},
		Listeners: []gwapiv1.ListenerStatus{{
			Name:       "http",
			Conditions: []metav1.Condition{cond("Programmed", programmed, "Programmed", gen, t1)},
		}},
	}
}

func TestGatewayStatusProgrammedGate(t *testing.T) {
	addr := []gwapiv1.GatewayStatusAddress{{Type: ptr(gwapiv1.IPAddressType), Value: "10.99.0.1"}}
	tests := []struct {
		name       string
		live       gwapiv1.GatewayStatus
		desired    *gwapiv1.GatewayStatus
		gate       gate
		wantStatus metav1.ConditionStatus
		wantReason string
		wantGen    int64
	}{
		{name: "applied and address published: programmed",
			live: gwapiv1.GatewayStatus{Addresses: addr}, desired: gwStatus(2, "True"),
			gate: gate{Generation: 2, Applied: 2, Addresses: addr}, wantStatus: "True", wantReason: "Programmed", wantGen: 2},
		{name: "address not yet in live status: held as pending",
			desired: gwStatus(2, "True"),
			gate:    gate{Generation: 2, Applied: 2, Addresses: addr}, wantStatus: "False", wantReason: "Pending", wantGen: 2},
		{name: "not applied yet: the older generation's Programmed=True stays",
			live:    gwapiv1.GatewayStatus{Addresses: addr, Conditions: []metav1.Condition{cond("Programmed", "True", "Programmed", 1, t0)}},
			desired: gwStatus(2, "True"),
			gate:    gate{Generation: 2, Applied: 1, Addresses: addr}, wantStatus: "True", wantReason: "Programmed", wantGen: 1},
		{name: "not applied, older generation was invalid: pending",
			live:    gwapiv1.GatewayStatus{Addresses: addr, Conditions: []metav1.Condition{cond("Programmed", "False", "Invalid", 1, t0)}},
			desired: gwStatus(2, "True"),
			gate:    gate{Generation: 2, Applied: 1, Addresses: addr}, wantStatus: "False", wantReason: "Pending", wantGen: 2},
		{name: "no address configured: AddressNotAssigned",
			desired: gwStatus(2, "True"),
			gate:    gate{Generation: 2, Applied: 2}, wantStatus: "False", wantReason: "AddressNotAssigned", wantGen: 2},
		{name: "no address, and the translator says not programmed: its reason stays",
			desired: gwStatus(2, "False"),
			gate:    gate{Generation: 2, Applied: 2}, wantStatus: "False", wantReason: "Programmed", wantGen: 2},
		{name: "translator says not programmed: written at once",
			desired: gwStatus(3, "False"),
			gate:    gate{Generation: 3, Applied: 1, Addresses: addr}, wantStatus: "False", wantReason: "Programmed", wantGen: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := gatewayStatus(tc.live, tc.desired, tc.gate)
			c := meta.FindStatusCondition(got.Conditions, "Programmed")
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.ObservedGeneration != tc.wantGen {
				t.Fatalf("Programmed = %s/%s gen %d, want %s/%s gen %d", c.Status, c.Reason, c.ObservedGeneration, tc.wantStatus, tc.wantReason, tc.wantGen)
			}
			lc := meta.FindStatusCondition(got.Listeners[0].Conditions, "Programmed")
			if lc.Status == "True" && (c.Status != "True" || c.ObservedGeneration != tc.gate.Generation) {
				t.Fatalf("listener Programmed=True while the Gateway's current generation is not: %+v", c)
			}
			if !Equal(got.Addresses, tc.gate.Addresses) {
				t.Fatalf("addresses = %v, want %v", got.Addresses, tc.gate.Addresses)
			}
			if acc := meta.FindStatusCondition(got.Conditions, "Accepted"); acc.Status != "True" {
				t.Fatalf("Accepted changed: %+v", acc)
			}
		})
	}
}

func TestRouteParents(t *testing.T) {
	const us, them = gwapiv1.GatewayController("coxswain-labs.dev/gateway-controller"), gwapiv1.GatewayController("example.com/other")
	ref := func(name string) gwapiv1.ParentReference {
		return gwapiv1.ParentReference{Name: gwapiv1.ObjectName(name)}
	}
	parent := func(c gwapiv1.GatewayController, name string, st metav1.ConditionStatus, at metav1.Time) gwapiv1.RouteParentStatus {
		return gwapiv1.RouteParentStatus{ParentRef: ref(name), ControllerName: c,
			Conditions: []metav1.Condition{cond("Accepted", st, "Accepted", 1, at)}}
	}
	tests := []struct {
		name    string
		live    []gwapiv1.RouteParentStatus
		desired []gwapiv1.RouteParentStatus
		want    []gwapiv1.RouteParentStatus
	}{
		{name: "others' entries are kept, ours appended",
			live:    []gwapiv1.RouteParentStatus{parent(them, "a", "True", t0)},
			desired: []gwapiv1.RouteParentStatus{parent(us, "b", "True", t1)},
			want:    []gwapiv1.RouteParentStatus{parent(them, "a", "True", t0), parent(us, "b", "True", t1)}},
		{name: "ours replaced, unchanged status keeps its time",
			live:    []gwapiv1.RouteParentStatus{parent(us, "b", "True", t0), parent(them, "b", "False", t0)},
			desired: []gwapiv1.RouteParentStatus{parent(us, "b", "True", t1)},
			want:    []gwapiv1.RouteParentStatus{parent(them, "b", "False", t0), parent(us, "b", "True", t0)}},
		{name: "ours no longer desired are dropped",
			live: []gwapiv1.RouteParentStatus{parent(us, "b", "True", t0), parent(them, "a", "True", t0)},
			want: []gwapiv1.RouteParentStatus{parent(them, "a", "True", t0)}},
		{name: "the same parent under another controller is not ours",
			live:    []gwapiv1.RouteParentStatus{parent(them, "b", "True", t0)},
			desired: []gwapiv1.RouteParentStatus{parent(us, "b", "False", t1)},
			want:    []gwapiv1.RouteParentStatus{parent(them, "b", "True", t0), parent(us, "b", "False", t1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := routeParents(tc.live, tc.desired, us)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d parents, want %d: %+v", len(got), len(tc.want), got)
			}
			for i := range got {
				// Equal ignores lastTransitionTime, so check it separately.
				if !Equal(got[i], tc.want[i]) || !got[i].Conditions[0].LastTransitionTime.Equal(&tc.want[i].Conditions[0].LastTransitionTime) {
					t.Fatalf("parent %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestRouteStatusEqualIsSemantic: the typed comparison of route statuses answers as the
// reflective one does, for a status and each of its variations; and it still knows every field.
func TestRouteStatusEqualIsSemantic(t *testing.T) {
	for typ, fields := range map[reflect.Type]int{
		reflect.TypeFor[gwapiv1.RouteStatus]():       1,
		reflect.TypeFor[gwapiv1.RouteParentStatus](): 3,
		reflect.TypeFor[gwapiv1.ParentReference]():   6,
		reflect.TypeFor[metav1.Condition]():          6,
	} {
		if typ.NumField() != fields {
			t.Errorf("%s has %d fields, routeStatusEqual compares %d: compare the new ones", typ, typ.NumField(), fields)
		}
	}
	sec, port, group := gwapiv1.SectionName("http"), gwapiv1.PortNumber(80), gwapiv1.Group(gwapiv1.GroupName)
	base := func() *gwapiv1.RouteStatus {
		return &gwapiv1.RouteStatus{Parents: []gwapiv1.RouteParentStatus{{
			ParentRef:      gwapiv1.ParentReference{Name: "gw", SectionName: &sec, Group: &group},
			ControllerName: "c",
			Conditions:     []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", 1, t0)},
		}}}
	}
	variants := map[string]func(*gwapiv1.RouteStatus){
		"same":            func(*gwapiv1.RouteStatus) {},
		"transition time": func(s *gwapiv1.RouteStatus) { s.Parents[0].Conditions[0].LastTransitionTime = t1 },
		"generation":      func(s *gwapiv1.RouteStatus) { s.Parents[0].Conditions[0].ObservedGeneration = 2 },
		"message":         func(s *gwapiv1.RouteStatus) { s.Parents[0].Conditions[0].Message = "other" },
		"condition added": func(s *gwapiv1.RouteStatus) {
			s.Parents[0].Conditions = append(s.Parents[0].Conditions, cond("X", "True", "X", 1, t0))
		},
		"no conditions":      func(s *gwapiv1.RouteStatus) { s.Parents[0].Conditions = nil },
		"controller":         func(s *gwapiv1.RouteStatus) { s.Parents[0].ControllerName = "d" },
		"port set":           func(s *gwapiv1.RouteStatus) { s.Parents[0].ParentRef.Port = &port },
		"section unset":      func(s *gwapiv1.RouteStatus) { s.Parents[0].ParentRef.SectionName = nil },
		"section equal copy": func(s *gwapiv1.RouteStatus) { c := sec; s.Parents[0].ParentRef.SectionName = &c },
		"name":               func(s *gwapiv1.RouteStatus) { s.Parents[0].ParentRef.Name = "other" },
		"no parents":         func(s *gwapiv1.RouteStatus) { s.Parents = nil },
		"empty parents":      func(s *gwapiv1.RouteStatus) { s.Parents = []gwapiv1.RouteParentStatus{} },
	}
	for name, change := range variants {
		b := base()
		change(b)
		if got, want := Equal(base(), b), semantic.DeepEqual(base(), b); got != want {
			t.Errorf("%s: Equal says %t, semantic.DeepEqual %t", name, got, want)
		}
	}
	if !Equal(&gwapiv1.RouteStatus{}, &gwapiv1.RouteStatus{Parents: []gwapiv1.RouteParentStatus{}}) {
		t.Error("nil and empty parents differ")
	}
}
