package integration

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/controller/features"
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/translation"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// v163CRDs are the Gateway API v1.6.3 standard-channel manifests, as released.
const v163CRDs = "test/integration/testdata/gateway-api-v1.6.3"

// retryClaim is a controller-side module that claims the HTTPRoute retry features, which only
// the v1.7.0 CRDs serve: with it the claim of a build on v1.6.3 CRDs visibly lacks features that
// an upgrade to v1.7.0 brings, whichever retry module the build has (the claims add up, once each).
type retryClaim struct{}

func (retryClaim) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.test.retry_claim", New: func() core.Module { return retryClaim{} }}
}

func (retryClaim) GatewayAPIFeatures() []translation.Feature {
	return []translation.Feature{
		{Name: gwfeatures.SupportHTTPRouteRetryCodes, Requires: []core.ModuleID{"route.http"}},
		{Name: gwfeatures.SupportHTTPRouteRetryConnectionError, Requires: []core.ModuleID{"route.http"}},
	}
}

// withModules is the test binary's registry plus mods.
func withModules(mods ...core.Module) *core.Registry {
	for _, id := range registry.IDs() {
		info, _ := registry.Lookup(id)
		mods = append(mods, info.New())
	}
	return core.NewRegistry(mods...)
}

// servedSchemas are the Gateway API CRD schemas the API server serves now, read back from it.
func servedSchemas(t testing.TB, e *env.Env) features.Schemas {
	t.Helper()
	cs, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ApiextensionsV1().CustomResourceDefinitions().List(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for i := range list.Items {
		if features.Relevant(list.Items[i].Spec.Group) {
			crds = append(crds, &list.Items[i])
		}
	}
	return features.SchemasOf(crds)
}

// claimable is what a controller with reg claims on the CRDs e serves now.
func claimable(t testing.TB, e *env.Env, reg *core.Registry) []string {
	t.Helper()
	kept, _ := features.Filter(features.Supported(reg), servedSchemas(t, e))
	return featureNames(kept)
}

func featureNames(fs []gwapiv1.SupportedFeature) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, string(f.Name))
	}
	return out
}

// waitClaim waits until the GatewayClass claims exactly want.
func waitClaim(t *testing.T, e *env.Env, class string, want []string) {
	t.Helper()
	eventually(t, "GatewayClass "+class+" supportedFeatures", func() error {
		gc, err := e.Gateway.GatewayV1().GatewayClasses().Get(ctxFor(t), class, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := checkConds(gc.Status.Conditions, gc.Generation, accepted); err != nil {
			return err
		}
		if got := featureNames(gc.Status.SupportedFeatures); !slices.Equal(got, want) {
			return fmt.Errorf("supportedFeatures = %v, want %v", got, want)
		}
		return nil
	})
}

// TestGatewayAPIv16CRDs: on a cluster that still runs the Gateway API v1.6.3 CRDs the controller
// starts, serves HTTPRoutes, and claims no feature whose fields those CRDs lack (HTTPRoute
// retry is v1.7.0's); upgrading the CRDs to v1.7.0 while it runs grows the claim, with no restart.
func TestGatewayAPIv16CRDs(t *testing.T) {
	e := env.Start(t, env.WithGatewayAPIDir(v163CRDs))
	reg := withModules(retryClaim{})
	startController(t, e, controllerOpts{registry: reg})
	ns := namespace(t, e, "crd-v16", nil)
	createClass(t, e, "coxswain", "")
	startBackend(t, "v16", "10.99.116.1:8080")
	createService(t, e, ns, "svc", "10.99.116.1")
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", 18160))
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("svc", 1))))

	retry := []string{string(gwfeatures.SupportHTTPRouteRetryCodes), string(gwfeatures.SupportHTTPRouteRetryConnectionError)}
	all := featureNames(features.Supported(reg))
	for _, f := range retry {
		if !slices.Contains(all, f) {
			t.Fatalf("the registry does not serve %s: %v", f, all)
		}
	}

	t.Run("v1.6.3: only what the CRDs serve is claimed", func(t *testing.T) {
		want := claimable(t, e, reg)
		for _, f := range retry {
			if slices.Contains(want, f) {
				t.Fatalf("the v1.6.3 CRDs serve %s: %v", f, want)
			}
		}
		waitClaim(t, e, "coxswain", want)
		// Every claimed feature's kinds and fields are in the v1.6.3 schemas as served.
		served := servedSchemas(t, e)
		for _, f := range want {
			for _, n := range features.Needs[gwfeatures.FeatureName(f)] {
				if !served.Has(n) {
					t.Errorf("claims %s, but the v1.6.3 CRDs do not serve %+v", f, n)
				}
			}
		}
	})

	t.Run("v1.6.3: HTTPRoutes served", func(t *testing.T) {
		waitRouteParent(t, e, ns, "web", "", "", accepted, resolved)
		servedAt(t, gatewayIP, 18160, "", "/", http.StatusOK, "v16")
	})

	t.Run("upgrade to v1.7.0 grows the claim", func(t *testing.T) {
		before := claimable(t, e, reg)
		e.InstallGatewayAPI(t, "deploy/crds")
		want := claimable(t, e, reg)
		for _, f := range retry {
			if !slices.Contains(want, f) {
				t.Fatalf("the v1.7.0 CRDs do not serve %s: %v", f, want)
			}
		}
		if len(want) <= len(before) {
			t.Fatalf("claim did not grow: %v -> %v", before, want)
		}
		waitClaim(t, e, "coxswain", want)
		servedAt(t, gatewayIP, 18160, "", "/", http.StatusOK, "v16")
	})
}
