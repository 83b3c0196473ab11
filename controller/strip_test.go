package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	kjson "sigs.k8s.io/json"
)

// TestStripUnread: managed fields and kubectl's last-applied copy leave a cached object; its
// labels, other annotations, spec and status stay; a tombstone passes through untouched.
func TestStripUnread(t *testing.T) {
	route := &gwapiv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns", Labels: map[string]string{"app": "a"},
			Annotations: map[string]string{
				corev1.LastAppliedConfigAnnotation: `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute"}`,
				"example.com/keep":                 "yes",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec:   gwapiv1.HTTPRouteSpec{Hostnames: []gwapiv1.Hostname{"a.example"}},
		Status: gwapiv1.HTTPRouteStatus{RouteStatus: gwapiv1.RouteStatus{Parents: []gwapiv1.RouteParentStatus{{ControllerName: "c"}}}},
	}
	out, err := stripUnread(route)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*gwapiv1.HTTPRoute)
	if got.ManagedFields != nil {
		t.Errorf("managedFields kept: %v", got.ManagedFields)
	}
	if want := map[string]string{"example.com/keep": "yes"}; !maps.Equal(got.Annotations, want) {
		t.Errorf("annotations %v, want %v", got.Annotations, want)
	}
	if got.Labels["app"] != "a" || len(got.Spec.Hostnames) != 1 || len(got.Status.Parents) != 1 {
		t.Errorf("stripped more than it should: %+v", got)
	}

	tomb := cache.DeletedFinalStateUnknown{Key: "ns/r", Obj: route}
	if out, err := stripUnread(tomb); err != nil || out != any(tomb) {
		t.Errorf("tombstone: %v, %v", out, err)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ca", Annotations: map[string]string{
		corev1.LastAppliedConfigAnnotation: `{"data":{"ca.crt":"...","other":"..."}}`}},
		Data: map[string]string{"ca.crt": "PEM", "other": "x"}}
	kept, err := caOnly(cm)
	if err != nil {
		t.Fatal(err)
	}
	if k := kept.(*corev1.ConfigMap); len(k.Annotations) != 0 || !maps.Equal(k.Data, map[string]string{"ca.crt": "PEM"}) {
		t.Errorf("caOnly kept %v and %v", k.Annotations, k.Data)
	}
}

// BenchmarkCachedRouteHeap reports the live heap a cached HTTPRoute costs (B/route), decoded
// from the JSON the API server sends with client-go's decoder (with a status of one parent, as
// the controller writes it), created by a client or applied with `kubectl apply` (with its
// last-applied annotation), as the cache keeps it without and with stripUnread:
//
//	go test -run '^$' -bench CachedRouteHeap -benchtime 1x ./controller/
func BenchmarkCachedRouteHeap(b *testing.B) {
	const n = 5000
	for _, c := range []struct {
		name             string
		applied, stripIt bool
	}{{"created", false, false}, {"created,stripped", false, true}, {"applied,kept", true, false}, {"applied,stripped", true, true}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				raw := make([][]byte, n)
				for i := range raw {
					raw[i] = routeJSON(i, c.applied)
				}
				runtime.GC()
				before := liveHeap()
				routes := make([]*gwapiv1.HTTPRoute, n)
				for i := range routes {
					r := &gwapiv1.HTTPRoute{}
					// As client-go decodes what a watch sends (not encoding/json, whose decoder
					// shares some strings).
					if err := kjson.UnmarshalCaseSensitivePreserveInts(raw[i], r); err != nil {
						b.Fatal(err)
					}
					if c.stripIt {
						_, _ = stripUnread(r)
					}
					routes[i] = r
				}
				runtime.GC()
				b.ReportMetric(float64(liveHeap()-before)/n, "B/route")
				runtime.KeepAlive(routes)
				runtime.KeepAlive(raw) // in before and after alike
			}
		})
	}
}

func liveHeap() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// routeJSON is route i as the API server serves it: defaults filled in, one parent's status.
func routeJSON(i int, applied bool) []byte {
	spec := fmt.Sprintf(`{"parentRefs":[{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"gw"}],`+
		`"hostnames":["r-%d.example.com"],"rules":[{"matches":[{"path":{"type":"PathPrefix","value":"/"}}],`+
		`"backendRefs":[{"group":"","kind":"Service","name":"svc","port":80,"weight":1}]}]}`, i)
	annotations := ""
	if applied {
		last := fmt.Sprintf(`{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{"annotations":{},"name":"r-%d","namespace":"apps"},"spec":%s}`, i, spec)
		quoted, _ := json.Marshal(last)
		annotations = fmt.Sprintf(`"annotations":{%q:%s},`, corev1.LastAppliedConfigAnnotation, quoted)
	}
	cond := func(t, reason, msg string) string {
		return fmt.Sprintf(`{"type":%q,"status":"True","observedGeneration":1,"lastTransitionTime":"2026-12-06T10:00:00Z","reason":%q,"message":%q}`, t, reason, msg)
	}
	return fmt.Appendf(nil, `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{%s"name":"r-%d","namespace":"apps",`+
		`"uid":"6b1f0a4e-3c2d-4e5f-8a9b-%012d","resourceVersion":"%d","generation":1,"creationTimestamp":"2026-12-06T10:00:00Z"},`+
		`"spec":%s,"status":{"parents":[{"parentRef":{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"gw"},`+
		`"controllerName":"coxswain-labs.dev/gateway-controller","conditions":[%s,%s]}]}}`,
		annotations, i, i, 1000+i, spec, cond("Accepted", "Accepted", "Route is accepted"), cond("ResolvedRefs", "ResolvedRefs", "Resolved all the Object references for the Route"))
}

// BenchmarkStripUnread is the transform's CPU per cached route object (one per watch event).
func BenchmarkStripUnread(b *testing.B) {
	raw := routeJSON(1, false)
	r := &gwapiv1.HTTPRoute{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, r); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		_, _ = stripUnread(r)
	}
}

// TestStripUnreadInternsRouteStrings: the transform leaves a route's values as decoded (what
// the translator and the status writer read: spec and status compare equal to an untouched
// copy) while its status strings and parent references become one copy shared by every route,
// for every route kind; other objects pass as they are.
func TestStripUnreadInternsRouteStrings(t *testing.T) {
	decode := func(i int) *gwapiv1.HTTPRoute {
		r := &gwapiv1.HTTPRoute{}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(routeJSON(i, false), r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := decode(1), decode(2)
	wantA, wantB := a.DeepCopy(), b.DeepCopy()
	for _, r := range []*gwapiv1.HTTPRoute{a, b} {
		if _, err := stripUnread(r); err != nil {
			t.Fatal(err)
		}
	}
	if !equality.Semantic.DeepEqual(a, wantA) || !equality.Semantic.DeepEqual(b, wantB) {
		t.Fatalf("the transform changed a route's values:\n%+v\nwant\n%+v", a, wantA)
	}
	same := func(what, x, y string) {
		t.Helper()
		if unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: two copies of %q", what, x)
		}
	}
	pa, pb := a.Status.Parents[0], b.Status.Parents[0]
	same("controllerName", string(pa.ControllerName), string(pb.ControllerName))
	same("status parentRef group", string(*pa.ParentRef.Group), string(*pb.ParentRef.Group))
	same("spec parentRef group", string(*a.Spec.ParentRefs[0].Group), string(*b.Spec.ParentRefs[0].Group))
	for j := range pa.Conditions {
		ca, cb := pa.Conditions[j], pb.Conditions[j]
		same("condition type", ca.Type, cb.Type)
		same("condition reason", ca.Reason, cb.Reason)
		same("condition message", ca.Message, cb.Message)
	}

	// Another route kind: its status is a RouteStatus too.
	msg := func() string { return string([]byte("Route is accepted")) } // a string of its own each time
	grpc := func() *gwapiv1.GRPCRoute {
		return &gwapiv1.GRPCRoute{Status: gwapiv1.GRPCRouteStatus{RouteStatus: gwapiv1.RouteStatus{Parents: []gwapiv1.RouteParentStatus{
			{Conditions: []metav1.Condition{{Type: "Accepted", Message: msg()}}}}}}}
	}
	g1, g2 := grpc(), grpc()
	_, _ = stripUnread(g1)
	_, _ = stripUnread(g2)
	same("GRPCRoute condition message", g1.Status.Parents[0].Conditions[0].Message, g2.Status.Parents[0].Conditions[0].Message)

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	want := svc.DeepCopy()
	if out, err := stripUnread(svc); err != nil || !equality.Semantic.DeepEqual(out, want) {
		t.Errorf("a Service came out as %+v (%v)", out, err)
	}
}
