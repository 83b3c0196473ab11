package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth"
)

// JwtAuthSpec is the spec of a JwtAuth; its validation markers live on jwtauth.Spec. The
// module's config is that spec with the keys resolved by the controller (jwtauth.Config).
type JwtAuthSpec = jwtauth.Spec

// JwtAuth requires a JWT signed by a key of a JWKS (inline, or fetched by the controller) from an
// issuer. An HTTPRoute or GRPCRoute rule uses it with an ExtensionRef filter {group:
// gateway.coxswain-labs.dev, kind: JwtAuth, name: ...} naming an object in the route's namespace.
// It has no status: the routes that reference it report on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=coxswain,shortName=jwt
// +kubebuilder:printcolumn:name="Issuer",type=string,JSONPath=`.spec.issuer`
// +kubebuilder:printcolumn:name="JWKS",type=string,JSONPath=`.spec.jwks.remote.uri`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type JwtAuth struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is spelled jwtauth.Spec, not the alias, for controller-gen's deepcopy (see
	// PathRewriteRegex); jwtauth.Spec has its own DeepCopyInto.
	// +required
	Spec jwtauth.Spec `json:"spec"`
}

// JwtAuthList is a list of JwtAuth.
//
// +kubebuilder:object:root=true
type JwtAuthList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []JwtAuth `json:"items"`
}
