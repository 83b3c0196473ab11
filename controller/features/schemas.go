package features

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"
)

// Schemas are the resources the API server serves, each with its structural schema as the CRD
// declares it. Nil means unknown (the CRDs could not be read): then nothing is filtered.
type Schemas map[schema.GroupVersionResource]*apiextensionsv1.JSONSchemaProps

// SchemasOf are the served versions of the established CRDs among crds.
func SchemasOf(crds []*apiextensionsv1.CustomResourceDefinition) Schemas {
	out := Schemas{}
	for _, crd := range crds {
		if !Established(crd) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
			out[gvr] = &apiextensionsv1.JSONSchemaProps{} // served, with no schema to look into
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				out[gvr] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	return out
}

// Established reports whether the API server serves the CRD's resource.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// Has reports whether s serves n: its resource, and the field, enum value and rule it names.
func (s Schemas) Has(n Need) bool {
	root, ok := s[n.Resource]
	if !ok {
		return false
	}
	if n.Path == "" {
		return true
	}
	at := lookup(root, n.Path)
	if at == nil {
		return false
	}
	if n.Value != nil && !allows(at, n.Value) {
		return false
	}
	if n.Rule != "" && !slices.ContainsFunc(at.XValidations, func(r apiextensionsv1.ValidationRule) bool {
		return strings.Contains(r.Rule, n.Rule)
	}) {
		return false
	}
	return true
}

// lookup walks path ("spec.rules[].retry") down from root; nil when a step is not declared.
func lookup(root *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	at := root
	for step := range strings.SplitSeq(path, ".") {
		name, list := strings.CutSuffix(step, "[]")
		next, ok := at.Properties[name]
		if !ok {
			return nil
		}
		at = &next
		if list {
			if at.Items == nil || at.Items.Schema == nil {
				return nil
			}
			at = at.Items.Schema
		}
	}
	return at
}

// allows reports whether the schema's enum, if it has one, contains v.
func allows(at *apiextensionsv1.JSONSchemaProps, v any) bool {
	if len(at.Enum) == 0 {
		return true
	}
	want, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(at.Enum, func(e apiextensionsv1.JSON) bool { return bytes.Equal(bytes.TrimSpace(e.Raw), want) })
}

// Filter keeps the features of supported whose Needs s serves, in order; dropped names the
// others. With nil Schemas (unknown) it keeps everything.
func Filter(supported []gwapiv1.SupportedFeature, s Schemas) (kept []gwapiv1.SupportedFeature, dropped []gwfeatures.FeatureName) {
	if s == nil {
		return supported, nil
	}
	kept = []gwapiv1.SupportedFeature{}
	for _, f := range supported {
		name := gwfeatures.FeatureName(f.Name)
		if slices.ContainsFunc(Needs[name], func(n Need) bool { return !s.Has(n) }) {
			dropped = append(dropped, name)
			continue
		}
		kept = append(kept, f)
	}
	return kept, dropped
}

// Relevant reports whether a CRD of group can change what Filter keeps: only the Gateway API's
// can.
func Relevant(group string) bool { return group == gwapiv1.GroupName }
