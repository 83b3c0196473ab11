package v1alpha1_test

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

// TestBackendPolicyCRD checks what the policy's CRD promises beyond its Go type: a status
// subresource (the controller writes /status only), the GEP-713 policy label, and settings the
// schema does not validate, so that a value the controller cannot use is a warning in status,
// never an object the API server refuses.
func TestBackendPolicyCRD(t *testing.T) {
	path := filepath.Join("..", "..", "..", "..", "deploy", "crds", policyv1a1.GroupName+"_"+policyv1a1.BackendPolicyResource+".yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run make generate)", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(b, &crd); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if crd.Spec.Names.Kind != policyv1a1.BackendPolicyKind || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Fatalf("names %+v, scope %s", crd.Spec.Names, crd.Spec.Scope)
	}
	if got := crd.Labels["gateway.networking.k8s.io/policy"]; got != "Direct" {
		t.Errorf("policy label %q, want Direct", got)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("versions %+v", crd.Spec.Versions)
	}
	v := crd.Spec.Versions[0]
	if v.Name != policyv1a1.SchemeGroupVersion.Version || !v.Served || !v.Storage {
		t.Errorf("version %s served=%v storage=%v", v.Name, v.Served, v.Storage)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("no status subresource")
	}
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	if !slices.Contains(spec.Required, "targetRefs") {
		t.Errorf("spec.required %v, want targetRefs", spec.Required)
	}
	if got, want := slices.Sorted(maps.Keys(spec.Properties)), jsonFields(reflect.TypeFor[policyv1a1.CoxswainBackendPolicySpec]()); !slices.Equal(got, want) {
		t.Errorf("spec fields %v, Go type %v", got, want)
	}
	// Every setting is a bare string or integer: no enum, pattern, bounds or format beyond int32.
	for _, field := range []string{"timeouts", "loadBalancer", "circuitBreaker", "sessionPersistence"} {
		props := spec.Properties[field].Properties
		if len(props) == 0 {
			t.Errorf("spec.%s has no properties", field)
		}
		for name, p := range props {
			if p.Type != "string" && p.Type != "integer" {
				t.Errorf("%s.%s has type %s", field, name, p.Type)
			}
			if len(p.Enum) > 0 || p.Pattern != "" || p.Minimum != nil || p.Maximum != nil || p.MaxLength != nil || (p.Format != "" && p.Format != "int32") {
				t.Errorf("%s.%s is validated by the schema: %+v", field, name, p)
			}
		}
	}
}

func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "-" && f.IsExported() {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestNoModuleImports keeps the policy types free of module packages: the controller imports
// them, and a module they imported would be registered in every distribution.
func TestNoModuleImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(pkg, "github.com/coxswain-labs/coxswain/"); ok && rest != "modules/api/policy/v1alpha1" {
			t.Errorf("imports %s", pkg)
		}
	}
}
