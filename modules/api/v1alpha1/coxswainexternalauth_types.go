package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/extauth"
)

// CoxswainExternalAuthSpec is what a CoxswainExternalAuth object says; the module config the
// proxy loads is this plus what the controller adds (extauth.Config). Its validation markers live
// on extauth.Spec.
type CoxswainExternalAuthSpec = extauth.Spec

// CoxswainExternalAuth asks an authorization service — over HTTP (forward-auth) or Envoy's
// ext_authz gRPC API — about every request of the route rules that use it: as an ExtensionRef
// filter {group: gateway.coxswain-labs.dev, kind: CoxswainExternalAuth (or ExternalAuth), name}
// on a rule, and, with targetRefs, on every HTTPRoute and GRPCRoute rule of those Gateways.
// Its status has one ancestor per targeted Gateway.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=coxswain,shortName=extauth
// +kubebuilder:metadata:labels="gateway.networking.k8s.io/policy=Direct"
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.spec.protocol`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.backendRef.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CoxswainExternalAuth struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the auth service and how to ask it.
	// +required
	Spec extauth.Spec `json:"spec"`
	// Status has one ancestor per Gateway of spec.targetRefs.
	// +optional
	Status gwapiv1.PolicyStatus `json:"status,omitempty"`
}

// CoxswainExternalAuthList is a list of CoxswainExternalAuth.
//
// +kubebuilder:object:root=true
type CoxswainExternalAuthList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CoxswainExternalAuth `json:"items"`
}
