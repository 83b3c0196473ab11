// Package v1 is the hmacsign.example.com/v1 API group: the HMACSignature kind whose objects an
// HTTPRoute's ExtensionRef filter names. Its spec type is the module's own Config, so the CRD
// generated from this package (crds/, `make generate` at the Coxswain root) cannot drift from
// what the proxy decodes.
//
// +kubebuilder:object:generate=true
// +groupName=hmacsign.example.com
package v1
