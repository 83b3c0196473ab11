package integration

import (
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"testing"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	_ "github.com/coxswain-labs/coxswain/modules/filters/basicauth/translate" // the BasicAuth resolver
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var (
	basicAuthGVR   = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "basicauths"}
	compressionGVR = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "compressions"}
)

// createFilterObject creates a gateway.coxswain-labs.dev object with spec.
func createFilterObject(t *testing.T, e *env.Env, gvr schema.GroupVersionResource, kind, ns, name string, spec map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec,
	}}
	if _, err := e.Dynamic.Resource(gvr).Namespace(ns).Create(ctxFor(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func extRef(kind, name string) []gwapiv1.HTTPRouteFilter {
	return []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{
		Group: "gateway.coxswain-labs.dev", Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(name)}}}
}

// htpasswdSecret is a Secret for BasicAuth holding user's bcrypt hash of password.
func htpasswdSecret(t *testing.T, ns, name, user, password string, labelled bool) *corev1.Secret {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"auth": []byte(user + ":" + string(h) + "\n")}}
	if labelled {
		s.Labels = map[string]string{"ingress.coxswain-labs.dev/auth-basic": "true"}
	}
	return s
}

// getAs sends GET http://gatewayIP:port/path with Host host and Basic credentials (none when user
// is empty).
func getAs(port int, host, path, user, password string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d%s", gatewayIP, port, path), nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	if user != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	}
	res, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, backend: res.Header.Get("X-Backend"), body: string(body)}, err
}

// servedAs waits until GET path with the credentials answers status.
func servedAs(t *testing.T, port int, host, path, user, password string, status int) {
	t.Helper()
	eventually(t, fmt.Sprintf("GET %s%s as %q answered %d", host, path, user+":"+password, status), func() error {
		r, err := getAs(port, host, path, user, password)
		if err != nil {
			return err
		}
		if r.status != status {
			return fmt.Errorf("got %d: %s", r.status, r.body)
		}
		return nil
	})
}

// TestBasicAuthFilter: BasicAuth against a real API server. The controller reads only the
// labelled Secrets, a Secret update reaches the proxy without a restart, and a Secret in another
// namespace is used only once a ReferenceGrant lets BasicAuth objects refer to it; until then,
// and while a Secret is missing or unlabelled, the rule answers 503.
func TestBasicAuthFilter(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "basic", nil)
	vault := namespace(t, e, "vault", nil)
	const port, host = 18930, "basic.example"
	startBackend(t, "ba1", "10.99.73.1:8080")
	createClass(t, e, "basic", "")
	createGateway(t, e, ns, "gw", "basic", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.73.1")
	if _, err := e.Kube.CoreV1().Secrets(ns).Create(ctxFor(t), htpasswdSecret(t, ns, "htpasswd", "alice", "first", true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createFilterObject(t, e, basicAuthGVR, "BasicAuth", ns, "local", map[string]any{"secretRef": map[string]any{"name": "htpasswd"}})
	createFilterObject(t, e, basicAuthGVR, "BasicAuth", ns, "remote", map[string]any{"secretRef": map[string]any{"name": "htpasswd", "namespace": vault}})
	local := prefixRule("/local", backendRef("svc", 1))
	local.Filters = extRef("BasicAuth", "local")
	remote := prefixRule("/remote", backendRef("svc", 1))
	remote.Filters = extRef("BasicAuth", "remote")
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{host},
		local, remote, prefixRule("/", backendRef("svc", 1))))

	served(t, port, host, "/plain", 200, "ba1")
	servedAs(t, port, host, "/local/x", "alice", "first", 200)
	servedAs(t, port, host, "/local/x", "", "", 401)
	servedAs(t, port, host, "/local/x", "alice", "second", 401)
	// No ReferenceGrant (and no Secret yet) in the other namespace: closed.
	servedAs(t, port, host, "/remote/x", "alice", "first", 503)
	routeResolvedRefs(t, e, ns, "web", "RefNotPermitted")

	t.Run("secret update", func(t *testing.T) {
		cur, err := e.Kube.CoreV1().Secrets(ns).Get(ctxFor(t), "htpasswd", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Data = htpasswdSecret(t, ns, "htpasswd", "alice", "second", true).Data
		if _, err := e.Kube.CoreV1().Secrets(ns).Update(ctxFor(t), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		servedAs(t, port, host, "/local/x", "alice", "second", 200)
		servedAs(t, port, host, "/local/x", "alice", "first", 401)
	})

	t.Run("cross-namespace with a grant", func(t *testing.T) {
		if _, err := e.Kube.CoreV1().Secrets(vault).Create(ctxFor(t), htpasswdSecret(t, vault, "htpasswd", "bob", "vaulted", true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The Secret exists, but no grant yet.
		servedAs(t, port, host, "/remote/x", "bob", "vaulted", 503)
		_, err := e.Gateway.GatewayV1beta1().ReferenceGrants(vault).Create(ctxFor(t), &gwapiv1b1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Namespace: vault, Name: "basicauth"},
			Spec: gwapiv1b1.ReferenceGrantSpec{
				From: []gwapiv1b1.ReferenceGrantFrom{{Group: "gateway.coxswain-labs.dev", Kind: "BasicAuth", Namespace: gwapiv1.Namespace(ns)}},
				To:   []gwapiv1b1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		servedAs(t, port, host, "/remote/x", "bob", "vaulted", 200)
		servedAs(t, port, host, "/remote/x", "alice", "second", 401)
	})

	t.Run("label removed", func(t *testing.T) {
		cur, err := e.Kube.CoreV1().Secrets(ns).Get(ctxFor(t), "htpasswd", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Labels = nil
		if _, err := e.Kube.CoreV1().Secrets(ns).Update(ctxFor(t), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The controller no longer sees it: the rule fails closed, the others serve.
		servedAs(t, port, host, "/local/x", "alice", "second", 503)
		servedAs(t, port, host, "/remote/x", "bob", "vaulted", 200)
		routeResolvedRefs(t, e, ns, "web", "SecretNotFound")
	})
}

// TestCompressionFilter: a Compression object in the cluster compresses its rule's responses for
// a client that accepts gzip.
func TestCompressionFilter(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "compress", nil)
	const port, host = 18940, "compress.example"
	startBackend(t, "cz1", "10.99.74.1:8080")
	createClass(t, e, "compress", "")
	createGateway(t, e, ns, "gw", "compress", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.74.1")
	// The backend's answer is "cz1 <path>", sniffed as text/plain: minSize 0 compresses it.
	createFilterObject(t, e, compressionGVR, "Compression", ns, "gz", map[string]any{"minSize": 0})
	rule := prefixRule("/z", backendRef("svc", 1))
	rule.Filters = extRef("Compression", "gz")
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{host}, rule))

	eventually(t, "GET /z/x answered gzip", func() error {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d/z/x", gatewayIP, port), nil)
		if err != nil {
			return err
		}
		req.Host = host
		req.Header.Set("Accept-Encoding", "gzip")
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "gzip" {
			return fmt.Errorf("status %d, Content-Encoding %q", res.StatusCode, res.Header.Get("Content-Encoding"))
		}
		gz, err := gzip.NewReader(res.Body)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(gz)
		if err != nil || string(body) != "cz1 /z/x" {
			return fmt.Errorf("decoded %q, %v", body, err)
		}
		return nil
	})
}
