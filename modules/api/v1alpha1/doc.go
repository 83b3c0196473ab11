// Package v1alpha1 is the gateway.coxswain-labs.dev/v1alpha1 API group: the kinds Coxswain's own
// ExtensionRef filters are configured with. Import it as cxv1a1. The group's policy kinds are in
// modules/api/policy/v1alpha1: this package imports the filter modules, and the controller, which
// reads policies typed, must not link every filter in.
//
// A filter kind's spec type is the proxy module's Config itself (FooSpec is only an alias), not a
// copy: the controller copies an object's .spec verbatim into the module's config and the proxy
// decodes it strictly, so the CRD schema and the module must be the same Go type or they drift.
// A kind with a controller-side resolver is the exception: BasicAuth's spec (basicauth.Spec)
// names a Secret, and the resolver gives the module the users it holds. The CRDs in
// deploy/crds are generated from this package by controller-gen (`make generate`); `make test`
// fails when they are stale.
//
// +kubebuilder:object:generate=true
// +groupName=gateway.coxswain-labs.dev
package v1alpha1
