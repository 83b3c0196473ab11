package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/modules/filters/extauth"
	_ "github.com/coxswain-labs/coxswain/modules/filters/extauth/translate" // the CoxswainExternalAuth resolver
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var externalAuthGVR = schema.GroupVersionResource{Group: extauth.API.Group, Version: extauth.API.Version, Resource: extauth.API.Resource}

// authServer is a real forward-auth service: it allows a request whose header allowHeader is
// "yes" and denies every other with 401 and body "denied by <name>".
type authServer struct {
	name string
	hits atomic.Int64
}

func startAuthServer(t *testing.T, name, addr, allowHeader string) *authServer {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("auth server %s: %v", name, err)
	}
	a := &authServer{name: name}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.hits.Add(1)
		if r.Header.Get(allowHeader) == "yes" {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+name+`"`)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "denied by %s", name)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return a
}

// getWith sends GET http://gatewayIP:port/path with Host host and the given headers.
func getWith(port int, host, path string, header map[string]string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d%s", gatewayIP, port, path), nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, backend: res.Header.Get("X-Backend"), body: string(body), header: res.Header}, err
}

// answered waits until a request with header gets status, from backend when set, with a body
// equal to body when set.
func answered(t *testing.T, port int, host string, header map[string]string, status int, backend, body string) {
	t.Helper()
	eventually(t, fmt.Sprintf("GET %s with %v answered %d by %q %q", host, header, status, backend, body), func() error {
		r, err := getWith(port, host, "/x", header)
		if err != nil {
			return err
		}
		if r.status != status || (backend != "" && r.backend != backend) || (body != "" && r.body != body) {
			return fmt.Errorf("got %d from %q: %q", r.status, r.backend, strings.TrimSpace(r.body))
		}
		return nil
	})
}

// TestExternalAuthGatewayPolicy: the real extauth module (the stock build's) and its resolver
// against the real API server. A CoxswainExternalAuth whose targetRefs name a Gateway checks
// every request of that Gateway's routes with a real HTTP forward-auth server (behind a Service
// and EndpointSlice): 401 with the auth server's body without the allowing header, the backend's
// 200 with it; its status.ancestors is Accepted. A second object on the same Gateway is
// Conflicted on the real object (the dynamic status writer) and does not apply. A backendRef to
// another namespace without a ReferenceGrant fails closed (503) with the route ResolvedRefs=False
// RefNotPermitted; a ReferenceGrant from CoxswainExternalAuth makes it work. Deleting the winner
// hands the Gateway to the other object. An ExtensionRef of the alias kind ExternalAuth on a rule
// of another Gateway works too.
func TestExternalAuthGatewayPolicy(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "extauth", nil)
	authNS := namespace(t, e, "extauth-svc", nil)
	const port, aliasPort = 19310, 19311
	const host, aliasHost = "app.example", "alias.example"
	startBackend(t, "app", "10.99.91.1:8080")
	local := startAuthServer(t, "local", "10.99.91.2:8080", "X-Allow")
	remote := startAuthServer(t, "remote", "10.99.91.3:8080", "X-Allow")
	createClass(t, e, "extauth", "")
	createGateway(t, e, ns, "gw", "extauth", httpListener("http", port))
	createGateway(t, e, ns, "gw-alias", "extauth", httpListener("http", aliasPort))
	createService(t, e, ns, "app", "10.99.91.1")
	createService(t, e, ns, "auth", "10.99.91.2")
	createService(t, e, ns, "nobody") // no endpoints
	createService(t, e, authNS, "auth", "10.99.91.3")
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{host}, prefixRule("/", backendRef("app", 1))))
	allow := map[string]string{"X-Allow": "yes"}

	createExternalAuth(t, e, ns, "a-gate", map[string]any{
		"targetRefs": []any{map[string]any{"group": gwapiv1.GroupName, "kind": "Gateway", "name": "gw"}},
		"protocol":   "HTTP", "backendRef": map[string]any{"name": "auth", "port": int64(80)},
	})
	t.Run("every request on the Gateway is checked", func(t *testing.T) {
		answered(t, port, host, nil, 401, "", "denied by local")
		answered(t, port, host, allow, 200, "app", "")
		if local.hits.Load() == 0 {
			t.Error("the auth server was never asked")
		}
		waitPolicyAncestor(t, e, externalAuthGVR, ns, "a-gate", "gw", "", "True", "Accepted", "Applied to every HTTPRoute and GRPCRoute rule on Gateway "+ns+"/gw")
	})

	createExternalAuth(t, e, ns, "b-second", map[string]any{
		"targetRefs": []any{map[string]any{"group": gwapiv1.GroupName, "kind": "Gateway", "name": "gw"}},
		"protocol":   "HTTP", "backendRef": map[string]any{"name": "nobody", "port": int64(80)},
	})
	t.Run("a second object on the Gateway is Conflicted and does not apply", func(t *testing.T) {
		waitPolicyAncestor(t, e, externalAuthGVR, ns, "b-second", "gw", "", "False", "Conflicted",
			"CoxswainExternalAuth "+ns+"/a-gate is older and targets Gateway "+ns+"/gw too")
		answered(t, port, host, allow, 200, "app", "") // b-second's Service has no endpoints: 503 if it ran
	})

	t.Run("a cross-namespace backendRef without a ReferenceGrant fails closed", func(t *testing.T) {
		updateObjectSpec(t, e, ns, "a-gate", func(spec map[string]any) {
			spec["backendRef"] = map[string]any{"name": "auth", "namespace": authNS, "port": int64(80)}
		})
		answered(t, port, host, allow, 503, "", "")
		answered(t, port, host, nil, 503, "", "")
		routeResolvedRefs(t, e, ns, "web", string(gwapiv1.RouteReasonRefNotPermitted))
	})

	t.Run("a ReferenceGrant from CoxswainExternalAuth lets it through", func(t *testing.T) {
		_, err := e.Gateway.GatewayV1beta1().ReferenceGrants(authNS).Create(ctxFor(t), &gwapiv1b1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Namespace: authNS, Name: "extauth"},
			Spec: gwapiv1b1.ReferenceGrantSpec{
				From: []gwapiv1b1.ReferenceGrantFrom{{Group: "gateway.coxswain-labs.dev", Kind: "CoxswainExternalAuth", Namespace: gwapiv1.Namespace(ns)}},
				To:   []gwapiv1b1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		answered(t, port, host, allow, 200, "app", "")
		answered(t, port, host, nil, 401, "", "denied by remote")
		if remote.hits.Load() == 0 {
			t.Error("the other namespace's auth server was never asked")
		}
		waitPolicyAncestor(t, e, externalAuthGVR, ns, "a-gate", "gw", "", "True", "Accepted", "Applied") // observedGeneration 2
		resolvedRefsMessage(t, e, ns, "web")
	})

	t.Run("deleting the winner hands the Gateway to the other object", func(t *testing.T) {
		deleteObject(t, e, externalAuthGVR, ns, "a-gate")
		waitPolicyAncestor(t, e, externalAuthGVR, ns, "b-second", "gw", "", "True", "Accepted", "Applied to every HTTPRoute and GRPCRoute rule on Gateway "+ns+"/gw")
		answered(t, port, host, allow, 503, "", "") // its auth Service has no ready endpoint
	})

	t.Run("an object whose targetRefs are removed stops applying and loses its ancestors", func(t *testing.T) {
		updateObjectSpec(t, e, ns, "b-second", func(spec map[string]any) { delete(spec, "targetRefs") })
		answered(t, port, host, nil, 200, "app", "")
		eventually(t, "b-second without ancestors", func() error {
			p, err := getPolicyObject(t, e, externalAuthGVR, ns, "b-second")
			if err != nil {
				return err
			}
			if len(p.Status.Ancestors) != 0 {
				return fmt.Errorf("ancestors %+v", p.Status.Ancestors)
			}
			return nil
		})
	})

	t.Run("an ExtensionRef of the alias kind ExternalAuth", func(t *testing.T) {
		createExternalAuth(t, e, ns, "plain", map[string]any{"protocol": "HTTP", "backendRef": map[string]any{"name": "auth", "port": int64(80)}})
		rule := prefixRule("/", backendRef("app", 1))
		rule.Filters = extRef("ExternalAuth", "plain")
		createRoute(t, e, httpRoute(ns, "alias", []gwapiv1.ParentReference{parentRef(ns, "gw-alias")}, []string{aliasHost}, rule))
		answered(t, aliasPort, aliasHost, nil, 401, "", "denied by local")
		answered(t, aliasPort, aliasHost, allow, 200, "app", "")
		p, err := getPolicyObject(t, e, externalAuthGVR, ns, "plain")
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Status.Ancestors) != 0 {
			t.Errorf("an object without targetRefs has ancestors: %+v", p.Status.Ancestors)
		}
	})
}

func createExternalAuth(t *testing.T, e *env.Env, ns, name string, spec map[string]any) {
	t.Helper()
	createFilterObject(t, e, externalAuthGVR, "CoxswainExternalAuth", ns, name, spec)
}

// updateObjectSpec re-reads a CoxswainExternalAuth, changes its spec and updates it.
func updateObjectSpec(t *testing.T, e *env.Env, ns, name string, change func(spec map[string]any)) {
	t.Helper()
	eventually(t, "updating "+name, func() error {
		cur, err := e.Dynamic.Resource(externalAuthGVR).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		spec, _, _ := unstructured.NestedMap(cur.Object, "spec")
		change(spec)
		if err := unstructured.SetNestedMap(cur.Object, spec, "spec"); err != nil {
			return err
		}
		_, err = e.Dynamic.Resource(externalAuthGVR).Namespace(ns).Update(ctxFor(t), cur, metav1.UpdateOptions{})
		return err
	})
}
