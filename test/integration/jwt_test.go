package integration

import (
	"fmt"
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/documents"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
	_ "github.com/coxswain-labs/coxswain/modules/filters/jwtauth/translate" // the JwtAuth resolver
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var jwtAuthGVR = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "jwtauths"}

// TestJwtAuthRemote: a JwtAuth with jwks.remote against the real API server (its CRD from
// deploy/crds). The controller — not the proxy — fetches the JWKS from a loopback HTTPS server:
// while the server fails, the route is ResolvedRefs=False JWKSUnavailable and its rule answers
// 503; once it serves, the key's tokens pass and a request without one is 401; after the server
// rotates its keys, the new key works and the old one does not, with nothing changed in the
// cluster.
func TestJwtAuthRemote(t *testing.T) {
	k1, k2 := jwttest.NewEC("k1"), jwttest.NewRSA("k2", "PS256")
	jwks := jwttest.NewServer(true, k1)
	t.Cleanup(jwks.Close)
	jwks.Fail(http.StatusServiceUnavailable)

	e := env.Start(t)
	startController(t, e, controllerOpts{documents: documents.Options{Client: jwks.Client()}})
	ns := namespace(t, e, "jwt", nil)
	const port = 18480
	startBackend(t, "j1", "10.99.70.1:8080")
	createClass(t, e, "jwt", "")
	createGateway(t, e, ns, "gw", "jwt", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.70.1")
	rule := prefixRule("/", backendRef("svc", 1))
	rule.Filters = []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{
		Group: "gateway.coxswain-labs.dev", Kind: "JwtAuth", Name: "auth"}}}
	createRoute(t, e, httpRoute(ns, "api", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"jwt.example"}, rule))
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.coxswain-labs.dev/v1alpha1", "kind": "JwtAuth",
		"metadata": map[string]any{"namespace": ns, "name": "auth"},
		"spec": map[string]any{"issuer": "https://idp.test", "audiences": []any{"api"},
			"jwks":           map[string]any{"remote": map[string]any{"uri": jwks.JWKSURL(), "refreshInterval": "1s"}},
			"claimToHeaders": []any{map[string]any{"claim": "sub", "header": "x-user-id"}}},
	}}
	if _, err := e.Dynamic.Resource(jwtAuthGVR).Namespace(ns).Create(ctxFor(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := obj.DeepCopy()
	bad.SetName("both")
	_ = unstructured.SetNestedField(bad.Object, "{}", "spec", "jwks", "inline")
	if _, err := e.Dynamic.Resource(jwtAuthGVR).Namespace(ns).Create(ctxFor(t), bad, metav1.CreateOptions{}); err == nil {
		t.Error("the API server accepted a JwtAuth with both jwks.remote and jwks.inline")
	}

	tok1 := k1.Sign(jwttest.Claims("https://idp.test", "api", nil))
	tok2 := k2.Sign(jwttest.Claims("https://idp.test", "api", nil))
	answers := func(what, tok string, status int) {
		t.Helper()
		eventually(t, what, func() error {
			req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d/x", gatewayIP, port), nil)
			if err != nil {
				return err
			}
			req.Host = "jwt.example"
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != status {
				return fmt.Errorf("got %d, want %d", resp.StatusCode, status)
			}
			return nil
		})
	}
	answers("503 while the JWKS cannot be fetched", tok1, 503)
	routeResolvedRefs(t, e, ns, "api", "JWKSUnavailable")

	jwks.Rotate(k1)
	answers("k1's token accepted", tok1, 200)
	answers("no token", "", 401)
	answers("k2's token before the rotation", tok2, 401)

	jwks.Rotate(k2)
	answers("k2's token after the rotation", tok2, 200)
	answers("k1's token after the rotation", tok1, 401)
}
