package integration

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	_ "github.com/coxswain-labs/coxswain/modules/filters/ratelimit/translate" // the RateLimit resolver (zone)
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var rateLimitGVR = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "ratelimits"}

// TestRateLimit runs the RateLimit filter as the controller against a real API server: the CRD
// rejects an invalid spec; two rules naming one object share its limit (429 past it, with
// Retry-After); changing the object starts a fresh limit.
func TestRateLimit(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "ratelimit", nil)
	const port = 18480
	startBackend(t, "r1", "10.99.11.1:8080")
	createClass(t, e, "rl", "")
	createGateway(t, e, ns, "gw", "rl", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.11.1")

	rl := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.coxswain-labs.dev/v1alpha1", "kind": "RateLimit",
			"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec,
		}}
	}
	client := e.Dynamic.Resource(rateLimitGVR).Namespace(ns)
	_, err := client.Create(ctxFor(t), rl("bad", map[string]any{"requests": int64(1), "key": map[string]any{"type": "Header"}}), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "header is required when type is Header") {
		t.Errorf("a Header key without a header: %v", err)
	}
	if _, err := client.Create(ctxFor(t), rl("api", map[string]any{"requests": int64(2), "unit": "Hour"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{
		Group: "gateway.coxswain-labs.dev", Kind: "RateLimit", Name: "api"}}}
	a, b := prefixRule("/a", backendRef("svc", 1)), prefixRule("/b", backendRef("svc", 1))
	a.Filters, b.Filters = ref, ref
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"rl.example"}, a, b))

	served(t, port, "rl.example", "/a", 200, "r1") // the first token (requests before the route was served spent none)
	if r, err := get(port, "rl.example", "/b"); err != nil || r.status != 200 {
		t.Fatalf("second request, other rule: %+v %v", r, err)
	}
	r, err := get(port, "rl.example", "/a")
	if err != nil || r.status != 429 || r.header.Get("Retry-After") == "" || r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("third request: %+v %v, want 429 with Retry-After", r, err)
	}

	cur, err := client.Get(ctxFor(t), "api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(cur.Object, int64(5), "spec", "requests")
	if _, err := client.Update(ctxFor(t), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	served(t, port, "rl.example", "/a", 200, "r1") // a fresh bucket of 5
}
