package v1alpha1_test

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/core"
	cxv1a1 "github.com/coxswain-labs/coxswain/modules/api/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/filters/basicauth"
	"github.com/coxswain-labs/coxswain/modules/filters/compression"
	"github.com/coxswain-labs/coxswain/modules/filters/extauth"
	"github.com/coxswain-labs/coxswain/modules/filters/ipaccess"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth"
	"github.com/coxswain-labs/coxswain/modules/filters/pathregex"
	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit"
	"github.com/coxswain-labs/coxswain/modules/filters/sizelimit"
)

// filterKinds is every filter kind of the group with its proxy module: the CRD must be the
// resource the module declares, and its spec fields the module's config fields.
var filterKinds = []struct {
	module core.ExtensionKind
	config reflect.Type
}{
	{(*basicauth.BasicAuth)(nil), reflect.TypeFor[basicauth.Spec]()}, // resolved into basicauth.Config
	{(*compression.Compression)(nil), reflect.TypeFor[compression.Config]()},
	// CoxswainExternalAuth's module config is the spec plus what the controller resolves.
	{(*extauth.ExternalAuth)(nil), reflect.TypeFor[extauth.Spec]()},
	{(*ipaccess.IpAccessControl)(nil), reflect.TypeFor[ipaccess.Config]()},
	{(*jwtauth.JwtAuth)(nil), reflect.TypeFor[jwtauth.Config]()},
	{(*pathregex.PathRewriteRegex)(nil), reflect.TypeFor[pathregex.Config]()},
	// RateLimit's module config is the spec plus the zone the controller's resolver adds.
	{(*ratelimit.RateLimit)(nil), reflect.TypeFor[ratelimit.Spec]()},
	{(*sizelimit.RequestSizeLimit)(nil), reflect.TypeFor[sizelimit.Config]()},
}

func readCRD(t *testing.T, api core.ExtensionAPI) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	path := filepath.Join("..", "..", "..", "deploy", "crds", api.Group+"_"+api.Resource+".yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the CRD of %s: %v (run make generate)", api.Kind, err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &crd
}

func TestCRDsMatchModules(t *testing.T) {
	for _, fk := range filterKinds {
		api := fk.module.ExtensionAPI()
		t.Run(api.Kind, func(t *testing.T) {
			if err := api.Check(fk.module.CoxswainModule().ID); err != nil {
				t.Fatal(err)
			}
			crd := readCRD(t, api)
			if crd.Spec.Group != cxv1a1.GroupName || api.Group != cxv1a1.GroupName {
				t.Errorf("group: CRD %q, module %q, want %q", crd.Spec.Group, api.Group, cxv1a1.GroupName)
			}
			if crd.Spec.Names.Kind != api.Kind || crd.Spec.Names.Plural != api.Resource {
				t.Errorf("CRD names %s/%s, module declares %s/%s", crd.Spec.Names.Kind, crd.Spec.Names.Plural, api.Kind, api.Resource)
			}
			if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != api.Version || !crd.Spec.Versions[0].Served {
				t.Fatalf("CRD versions %+v, want exactly %s, served", crd.Spec.Versions, api.Version)
			}
			v := crd.Spec.Versions[0]
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			got := slices.Sorted(maps.Keys(spec.Properties))
			if want := jsonFields(fk.config); !slices.Equal(got, want) {
				t.Errorf("CRD spec fields %v, module config fields %v", got, want)
			}
			if !slices.ContainsFunc(v.AdditionalPrinterColumns, func(c apiextensionsv1.CustomResourceColumnDefinition) bool {
				return c.Name == "Age"
			}) || len(v.AdditionalPrinterColumns) < 2 {
				t.Errorf("printer columns %+v, want the spec's key fields and Age", v.AdditionalPrinterColumns)
			}
		})
	}
}

// jsonFields is the sorted JSON names of a config struct's fields, embedded structs flattened.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name != "-" && f.IsExported() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestSpecIsModuleConfig follows an object the way the controller does: decode it with the
// scheme, take its .spec JSON as is, and let the proxy load the module from it.
func TestSpecIsModuleConfig(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := cxv1a1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, err := scheme.New(cxv1a1.SchemeGroupVersion.WithKind("PathRewriteRegex"))
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"apiVersion":"gateway.coxswain-labs.dev/v1alpha1","kind":"PathRewriteRegex",
		"metadata":{"name":"r","namespace":"default"},
		"spec":{"pattern":"^/v1/(.*)","substitution":"/$1"}}`)
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		t.Fatal(err)
	}
	prr := obj.(*cxv1a1.PathRewriteRegex)
	cp := prr.DeepCopy()
	if cp.Spec != prr.Spec || cp == prr {
		t.Errorf("DeepCopy: %+v, want a copy of %+v", cp.Spec, prr.Spec)
	}
	var whole map[string]any
	if err := yaml.Unmarshal(doc, &whole); err != nil {
		t.Fatal(err)
	}
	mc := core.MustConfig(pathregex.ModuleID, whole["spec"])
	bc := core.NewBuildContext(t.Context(), nil, core.NewRegistry((*pathregex.PathRewriteRegex)(nil)), nil)
	t.Cleanup(func() { _ = bc.Close() })
	f, err := core.Load[core.HTTPRequestFilter](bc, mc)
	if err != nil {
		t.Fatalf("loading the module from the object's spec: %v", err)
	}
	if got := f.(*pathregex.PathRewriteRegex).Config; got != prr.Spec {
		t.Errorf("module config %+v, typed spec %+v", got, prr.Spec)
	}
}
