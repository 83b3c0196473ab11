package controller

import (
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
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
// from the JSON the API server sends (with a status of one parent, as the controller writes it),
// created by a client or applied with `kubectl apply` (with its last-applied annotation), as the
// cache keeps it without and with stripUnread:
//
//	go test -run '^$' -bench CachedRouteHeap -benchtime 1x ./controller/
func BenchmarkCachedRouteHeap(b *testing.B) {
	const n = 5000
	for _, c := range []struct {
		name             string
		applied, stripIt bool
	}{{"created", false, false}, {"applied,kept", true, false}, {"applied,stripped", true, true}} {
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
					if err := json.Unmarshal(raw[i], r); err != nil {
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
