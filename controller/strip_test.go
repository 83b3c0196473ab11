package controller

import (
	"maps"
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
