package status

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// An unstructured policy's ancestors are merged and written through the dynamic client like a
// typed one's; the rest of its status is kept.
func TestDynamicPolicyClient(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "coxswainexternalauths"}
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.coxswain-labs.dev/v1alpha1", "kind": "CoxswainExternalAuth",
		"metadata": map[string]any{"namespace": "ns", "name": "a", "resourceVersion": "1"},
		"spec":     map[string]any{"x": "y"},
		"status": map[string]any{"extra": "kept", "ancestors": []any{map[string]any{
			"ancestorRef": map[string]any{"name": "gw"}, "controllerName": "example.com/other",
			"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Theirs", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}}}}},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "CoxswainExternalAuthList"}, live.DeepCopy())
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(live); err != nil {
		t.Fatal(err)
	}
	pc := DynamicPolicyClient("CoxswainExternalAuth", gvr.GroupResource(), idx, dyn.Resource(gvr))
	if _, st := pc.Status(live); len(st.Ancestors) != 1 || st.Ancestors[0].ControllerName != "example.com/other" {
		t.Fatalf("read %+v", st)
	}
	desired := &gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{{
		AncestorRef: gwapiv1.ParentReference{Name: "gw"}, ControllerName: ours,
		Conditions: []metav1.Condition{cond("Accepted", "False", "Conflicted", 1, t1)}}}}
	wrote, err := pc.sync(context.Background(), types.NamespacedName{Namespace: "ns", Name: "a"}, desired, ours)
	if err != nil || !wrote {
		t.Fatalf("sync: wrote %v, %v", wrote, err)
	}
	got, err := dyn.Resource(gvr).Namespace("ns").Get(context.Background(), "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, st := pc.Status(got)
	if len(st.Ancestors) != 2 || st.Ancestors[0].ControllerName != "example.com/other" || st.Ancestors[1].Conditions[0].Reason != "Conflicted" {
		t.Errorf("written ancestors %+v, want theirs then ours", st.Ancestors)
	}
	if extra, _, _ := unstructured.NestedString(got.Object, "status", "extra"); extra != "kept" {
		t.Errorf("status.extra = %q: the rest of the status must be kept", extra)
	}
	if spec, _, _ := unstructured.NestedString(got.Object, "spec", "x"); spec != "y" {
		t.Errorf("spec changed: %v", got.Object["spec"])
	}
}
