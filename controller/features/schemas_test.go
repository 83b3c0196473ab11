package features

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"
)

// crdsOf reads the CustomResourceDefinitions of dir's YAML files, marked Established as the API
// server would once they are served.
func crdsOf(t *testing.T, dir string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "gateway.networking*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Gateway API CRDs in %s (%v)", dir, err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(r, 64<<10)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := dec.Decode(&crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				continue
			}
			crd.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}
			out = append(out, &crd)
		}
		r.Close()
	}
	return out
}

// experimentalDir is config/crd/experimental of the gateway-api module the build uses.
func experimentalDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go list -m sigs.k8s.io/gateway-api: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental")
}

// gatewayFeatures are the v1.7.0 features a Gateway implementation may claim: every one but the
// mesh features.
func gatewayFeatures() []gwfeatures.FeatureName {
	var out []gwfeatures.FeatureName
	for _, f := range gwfeatures.AllFeatures.UnsortedList() {
		if !gwfeatures.MeshCoreFeatures.Has(f) && !gwfeatures.MeshExtendedFeatures.Has(f) {
			out = append(out, f.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Every feature has an entry, and every entry is served by the experimental CRDs of the Gateway
// API the binary is built on (a path with a typo would never be served).
func TestNeedsCoverEveryFeature(t *testing.T) {
	exp := SchemasOf(crdsOf(t, experimentalDir(t)))
	for _, f := range gatewayFeatures() {
		needs, ok := Needs[f]
		if !ok {
			t.Errorf("feature %s has no entry in Needs", f)
		}
		for _, n := range needs {
			if !exp.Has(n) {
				t.Errorf("feature %s: %+v is not served by the v1.7.0 experimental CRDs", f, n)
			}
		}
	}
	for f := range Needs {
		if gwfeatures.GetFeature(f).Name == "" {
			t.Errorf("Needs names unknown feature %q", f)
		}
	}
}

// What each set of CRDs leaves out of the union of every feature.
func TestFilterByCRDs(t *testing.T) {
	experimentalOnly := []gwfeatures.FeatureName{
		gwfeatures.SupportClusterTrustBundle,
		gwfeatures.SupportGatewayAddressRoutability,
		gwfeatures.SupportGatewayAddressRoutabilityCluster,
		gwfeatures.SupportGatewayListenerFilters,
	}
	tests := []struct {
		name, dir string
		dropped   []gwfeatures.FeatureName
	}{
		{name: "v1.6.3 standard: no retry, no experimental fields", dir: "../../test/integration/testdata/gateway-api-v1.6.3",
			dropped: append([]gwfeatures.FeatureName{gwfeatures.SupportHTTPRouteRetryCodes, gwfeatures.SupportHTTPRouteRetryConnectionError}, experimentalOnly...)},
		{name: "v1.7.0 standard (deploy/crds)", dir: "../../deploy/crds", dropped: experimentalOnly},
		{name: "v1.7.0 experimental", dir: ""},
	}
	var all []gwapiv1.SupportedFeature
	for _, f := range gatewayFeatures() {
		all = append(all, gwapiv1.SupportedFeature{Name: gwapiv1.FeatureName(f)})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir
			if dir == "" {
				dir = experimentalDir(t)
			}
			kept, dropped := Filter(all, SchemasOf(crdsOf(t, dir)))
			slices.Sort(dropped)
			slices.Sort(tc.dropped)
			if !slices.Equal(dropped, tc.dropped) {
				t.Errorf("dropped %v\n want %v", dropped, tc.dropped)
			}
			if len(kept)+len(dropped) != len(all) {
				t.Errorf("kept %d + dropped %d != %d", len(kept), len(dropped), len(all))
			}
		})
	}
}

func TestHas(t *testing.T) {
	s := SchemasOf(crdsOf(t, "../../test/integration/testdata/gateway-api-v1.6.3"))
	tests := []struct {
		name string
		need Need
		want bool
	}{
		{"served kind", kind(httpRoutes), true},
		{"version not served", Need{Resource: httpRoutes.GroupResource().WithVersion("v1alpha9")}, false},
		{"unknown resource", kind(gwv1("meshes")), false},
		{"field", field(httpRoutes, "spec.rules[].timeouts.request"), true},
		{"missing field", field(httpRoutes, "spec.rules[].retry"), false},
		{"list step on a non-list", field(httpRoutes, "spec.rules.name"), false},
		{"enum value allowed", Need{Resource: httpRoutes, Path: "spec.rules[].filters[].requestRedirect.statusCode", Value: 308}, true},
		{"enum value not allowed", Need{Resource: httpRoutes, Path: "spec.rules[].filters[].requestRedirect.statusCode", Value: 304}, false},
		{"string enum", Need{Resource: httpRoutes, Path: "spec.rules[].filters[].type", Value: "CORS"}, true},
		{"string enum, experimental value", Need{Resource: httpRoutes, Path: "spec.rules[].filters[].type", Value: "ExternalAuth"}, false},
		{"no enum allows any value", Need{Resource: gateways, Path: "spec.listeners[].name", Value: "x"}, true},
		{"rule absent", Need{Resource: gateways, Path: "spec.tls.frontend.default.validation.caCertificateRefs", Rule: "ClusterTrustBundle"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Has(tc.need); got != tc.want {
				t.Errorf("Has(%+v) = %v, want %v", tc.need, got, tc.want)
			}
		})
	}
}

func TestFilterUnknownSchemasKeepsAll(t *testing.T) {
	in := []gwapiv1.SupportedFeature{{Name: "HTTPRoute"}, {Name: "HTTPRouteRetryCodes"}}
	kept, dropped := Filter(in, nil)
	if !reflect.DeepEqual(kept, in) || dropped != nil {
		t.Errorf("Filter(nil) = %v, %v", kept, dropped)
	}
	// A CRD that is not Established is not served yet.
	crd := &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
		Group: gwapiv1.GroupName, Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "httproutes"},
		Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true}},
	}}
	if kept, _ := Filter(in, SchemasOf([]*apiextensionsv1.CustomResourceDefinition{crd})); len(kept) != 0 {
		t.Errorf("not established: kept %v", kept)
	}
}
