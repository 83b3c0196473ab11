package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/sizelimit"
)

// RequestSizeLimitSpec is the config of the filter.ext.gateway.coxswain-labs.dev.RequestSizeLimit
// module itself; its validation markers live on sizelimit.Config.
type RequestSizeLimitSpec = sizelimit.Config

// RequestSizeLimit refuses request bodies larger than spec.maxSize with 413, before they reach the
// upstream: at once for a declared Content-Length, while streaming for one of unknown length. An
// HTTPRoute rule uses it with an ExtensionRef filter {group: gateway.coxswain-labs.dev, kind:
// RequestSizeLimit, name: ...} naming an object in the route's namespace; on a GRPCRoute it is
// accepted and not enforced. The size's pattern here is loose: a unit the filter does not read
// leaves the limit unenforced, and the routes using the object say so. It has no status.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=coxswain,shortName=rsl
// +kubebuilder:printcolumn:name="Max Size",type=string,JSONPath=`.spec.maxSize`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RequestSizeLimit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is spelled sizelimit.Config, not the alias (see PathRewriteRegex).
	// +required
	Spec sizelimit.Config `json:"spec"`
}

// RequestSizeLimitList is a list of RequestSizeLimit.
//
// +kubebuilder:object:root=true
type RequestSizeLimitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RequestSizeLimit `json:"items"`
}
