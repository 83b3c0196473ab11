package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/basicauth"
)

// BasicAuthSpec is the spec of a BasicAuth object; its validation markers live on
// basicauth.Spec. Unlike most filter kinds it is not the module's config: the controller's
// resolver reads the Secret it names and gives the proxy the parsed users (basicauth.Config).
type BasicAuthSpec = basicauth.Spec

// BasicAuth admits the requests that carry the credentials (RFC 7617 Basic authentication) of a
// user of an htpasswd file, kept in a Secret labelled ingress.coxswain-labs.dev/auth-basic: "true"
// under the key "auth"; others get 401. An HTTPRoute rule uses it with an ExtensionRef filter
// {group: gateway.coxswain-labs.dev, kind: BasicAuth, name: ...} naming an object in the route's
// namespace. It has no status: the routes that reference it report on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=coxswain,shortName=ba
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.secretRef.name`
// +kubebuilder:printcolumn:name="Realm",type=string,JSONPath=`.spec.realm`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BasicAuth struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the BasicAuth configuration.
	// +required
	Spec basicauth.Spec `json:"spec"` // the type, not its alias: controller-gen's deepcopy does not see through aliases
}

// BasicAuthList is a list of BasicAuth.
//
// +kubebuilder:object:root=true
type BasicAuthList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BasicAuth `json:"items"`
}
