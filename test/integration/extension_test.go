package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// pathPrefixFilter is an ExtensionRef filter module as a third party writes one, compiled into
// this test binary only: it prepends its object's spec.prefix to the upstream path. Nothing in the
// controller knows the kind; it watches the resource because the module declares it.
type pathPrefixFilter struct {
	Prefix string `json:"prefix"`
}

// registerTestModules registers the modules only this test binary has (see registry).
func registerTestModules() { core.RegisterModule(&pathPrefixFilter{}) }

var pathPrefixGVR = schema.GroupVersionResource{Group: "ext.coxswain-test.dev", Version: "v1", Resource: "pathprefixes"}

func (*pathPrefixFilter) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.ext.ext.coxswain-test.dev.PathPrefix", New: func() core.Module { return new(pathPrefixFilter) }}
}

func (*pathPrefixFilter) ExtensionAPI() core.ExtensionAPI {
	return core.ExtensionAPI{Group: pathPrefixGVR.Group, Kind: "PathPrefix", Version: "v1", Resource: "pathprefixes"}
}

func (f *pathPrefixFilter) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	r.URL.Path = f.Prefix + r.URL.Path
	r.URL.RawPath = ""
	return true
}

// TestExtensionRefFilter: an ExtensionRef to a compiled-in filter.ext.* module works against a
// real API server, including a CRD installed after the controller started (no restart); a
// reference to a kind no module handles is ResolvedRefs=False/InvalidKind and its rule answers
// 500 while the route's other rules keep serving.
func TestExtensionRefFilter(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "ext", nil)
	const port = 18280
	startBackend(t, "x1", "10.99.8.1:8080")
	createClass(t, e, "ext", "")
	createGateway(t, e, ns, "gw", "ext", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.8.1")
	ref := func(group, kind, name string) []gwapiv1.HTTPRouteFilter {
		return []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{
			Group: gwapiv1.Group(group), Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(name)}}}
	}
	filtered := prefixRule("/f", backendRef("svc", 1))
	filtered.Filters = ref(pathPrefixGVR.Group, "PathPrefix", "p")
	unknown := prefixRule("/u", backendRef("svc", 1))
	unknown.Filters = ref("nobody.example.com", "Teleport", "t")
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"ext.example"},
		filtered, unknown, prefixRule("/", backendRef("svc", 1))))

	served(t, port, "ext.example", "/plain", 200, "x1")
	served(t, port, "ext.example", "/u/x", 500, "")
	// The CRD is not installed yet: the object cannot exist, and the rule must not skip its filter.
	served(t, port, "ext.example", "/f/x", 500, "")
	routeResolvedRefs(t, e, ns, "web", "FilterNotFound")

	installPathPrefixCRD(t, e)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ext.coxswain-test.dev/v1", "kind": "PathPrefix",
		"metadata": map[string]any{"namespace": ns, "name": "p"},
		"spec":     map[string]any{"prefix": "/ext"},
	}}
	if _, err := e.Dynamic.Resource(pathPrefixGVR).Namespace(ns).Create(ctxFor(t), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	servedBody(t, port, "ext.example", "/f/x", "x1 /ext/f/x")

	t.Run("object change", func(t *testing.T) {
		cur, err := e.Dynamic.Resource(pathPrefixGVR).Namespace(ns).Get(ctxFor(t), "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(cur.Object, "/v2", "spec", "prefix")
		if _, err := e.Dynamic.Resource(pathPrefixGVR).Namespace(ns).Update(ctxFor(t), cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		servedBody(t, port, "ext.example", "/f/x", "x1 /v2/f/x")
	})

	t.Run("unknown kind", func(t *testing.T) {
		routeResolvedRefs(t, e, ns, "web", "InvalidKind")
		served(t, port, "ext.example", "/u/x", 500, "")
		served(t, port, "ext.example", "/plain", 200, "x1")
	})
}

// installPathPrefixCRD creates the test filter's CRD and waits until it is established.
func installPathPrefixCRD(t *testing.T, e *env.Env) {
	t.Helper()
	client := apiextensionsclient.NewForConfigOrDie(e.Config)
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: pathPrefixGVR.Resource + "." + pathPrefixGVR.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: pathPrefixGVR.Group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "pathprefixes", Singular: "pathprefix", Kind: "PathPrefix", ListKind: "PathPrefixList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
	ctx := ctxFor(t)
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = client.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), crd.Name, metav1.DeleteOptions{})
	})
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not established: %v", crd.Name, err)
	}
}

// servedBody waits until GET host path answers 200 with body.
func servedBody(t *testing.T, port int, host, path, body string) {
	t.Helper()
	eventually(t, fmt.Sprintf("GET %s%s answered %q", host, path, body), func() error {
		r, err := get(port, host, path)
		if err != nil {
			return err
		}
		if r.status != 200 || r.body != body {
			return fmt.Errorf("got %d %q", r.status, r.body)
		}
		return nil
	})
}

// routeResolvedRefs waits until the HTTPRoute's ResolvedRefs condition is False with reason.
func routeResolvedRefs(t *testing.T, e *env.Env, ns, name, reason string) {
	t.Helper()
	eventually(t, fmt.Sprintf("HTTPRoute %s/%s ResolvedRefs=False %s", ns, name, reason), func() error {
		r, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			for _, c := range p.Conditions {
				if c.Type == string(gwapiv1.RouteConditionResolvedRefs) && c.Status == metav1.ConditionFalse && c.Reason == reason {
					return nil
				}
			}
		}
		return fmt.Errorf("status %+v", r.Status.Parents)
	})
}
