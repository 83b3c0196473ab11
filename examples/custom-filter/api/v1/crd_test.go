package v1_test

import (
	"os"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"example.com/hmacsign"
	hmacv1 "example.com/hmacsign/api/v1"
)

// crd is the part of the generated CRD the module depends on.
type crd struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind   string `json:"kind"`
			Plural string `json:"plural"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Schema struct {
				OpenAPIV3Schema struct {
					Properties struct {
						Spec struct {
							Properties map[string]struct {
								Default any `json:"default"`
							} `json:"properties"`
							Required []string `json:"required"`
						} `json:"spec"`
					} `json:"properties"`
				} `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// TestCRDIsTheModulesResource: the generated CRD is the resource the module declares, with the
// module's config fields as its spec (run `make generate` at the Coxswain root after a change).
func TestCRDIsTheModulesResource(t *testing.T) {
	api := hmacsign.API
	b, err := os.ReadFile("../../crds/" + api.Group + "_" + api.Resource + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c crd
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	if c.Spec.Group != api.Group || c.Spec.Names.Kind != api.Kind || c.Spec.Names.Plural != api.Resource ||
		len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Name != api.Version {
		t.Fatalf("CRD %+v is not %+v", c.Spec, api)
	}
	if gv := hmacv1.SchemeGroupVersion; gv.Group != api.Group || gv.Version != api.Version {
		t.Errorf("SchemeGroupVersion %v, module declares %s/%s", gv, api.Group, api.Version)
	}
	spec := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties.Spec
	var fields []string
	for name := range spec.Properties {
		fields = append(fields, name)
	}
	slices.Sort(fields)
	if want := []string{"header", "key", "keyID"}; !slices.Equal(fields, want) {
		t.Errorf("spec fields %v, want %v", fields, want)
	}
	if !slices.Equal(spec.Required, []string{"key"}) || spec.Properties["header"].Default != hmacsign.DefaultHeader {
		t.Errorf("required %v, header default %v", spec.Required, spec.Properties["header"].Default)
	}
}
