package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestCustomFilterController: examples/custom-filter (a third-party module with its own API
// group) is built into a distribution by the builder, and that binary, run as the controller
// against the real API server with the example's CRD installed, signs the requests of a route
// that references an HMACSignature object. Nothing in core/, controller/ or modules/ knows the
// kind.
func TestCustomFilterController(t *testing.T) {
	bin := buildDistribution(t, "--with", "example.com/hmacsign=./examples/custom-filter")
	e := env.Start(t)
	e.InstallCRDs(t, "examples/custom-filter/crds/hmacsign.example.com_hmacsignatures.yaml")
	ns := namespace(t, e, "hmac", nil)
	const port = 18380
	signatureBackend(t, "10.99.9.1:8080")
	createClass(t, e, "hmac", "")
	createGateway(t, e, ns, "gw", "hmac", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.9.1")
	gvr := schema.GroupVersionResource{Group: "hmacsign.example.com", Version: "v1", Resource: "hmacsignatures"}
	sig := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hmacsign.example.com/v1", "kind": "HMACSignature",
		"metadata": map[string]any{"namespace": ns, "name": "sign"},
		"spec":     map[string]any{"key": "cluster-key", "keyID": "k1"},
	}}
	if _, err := e.Dynamic.Resource(gvr).Namespace(ns).Create(ctxFor(t), sig, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rule := prefixRule("/", backendRef("svc", 1))
	rule.Filters = []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef,
		ExtensionRef: &gwapiv1.LocalObjectReference{Group: "hmacsign.example.com", Kind: "HMACSignature", Name: "sign"}}}
	createRoute(t, e, httpRoute(ns, "signed", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"hmac.example"}, rule))
	startBinary(t, e, bin, "hmac-controller", "--leader-elect=false", "--controller-name", "coxswain-labs.dev/gateway-controller")

	mac := hmac.New(sha256.New, []byte("cluster-key"))
	mac.Write([]byte("GET\n/orders/9?full=1"))
	want := hex.EncodeToString(mac.Sum(nil))
	eventually(t, "the backend sees the HMAC signature", func() error {
		r, err := get(port, "hmac.example", "/orders/9?full=1")
		if err != nil {
			return err
		}
		if r.status != 200 || r.body != want+" k1" {
			return fmt.Errorf("got %d %q, want signature %s k1", r.status, r.body, want)
		}
		return nil
	})
}

// signatureBackend answers every request with its x-signature and x-signature-key-id headers.
func signatureBackend(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.Header.Get("x-signature"), r.Header.Get("x-signature-key-id"))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}
