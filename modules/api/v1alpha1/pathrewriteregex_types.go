package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/pathregex"
)

// PathRewriteRegexSpec is the config of the filter.ext.gateway.coxswain-labs.dev.PathRewriteRegex
// module itself; its validation markers live on pathregex.Config.
type PathRewriteRegexSpec = pathregex.Config

// PathRewriteRegex rewrites the request path with an RE2 regular expression. An HTTPRoute rule
// uses it with an ExtensionRef filter {group: gateway.coxswain-labs.dev, kind: PathRewriteRegex,
// name: ...} naming an object in the route's namespace. It has no status: the routes that
// reference it report on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=coxswain,shortName=prr
// +kubebuilder:printcolumn:name="Pattern",type=string,JSONPath=`.spec.pattern`
// +kubebuilder:printcolumn:name="Substitution",type=string,JSONPath=`.spec.substitution`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PathRewriteRegex struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is spelled pathregex.Config, not the alias: controller-gen v0.23's deepcopy does not
	// see through type aliases and would call a DeepCopyInto that Config does not have.
	// +required
	Spec pathregex.Config `json:"spec"`
}

// PathRewriteRegexList is a list of PathRewriteRegex.
//
// +kubebuilder:object:root=true
type PathRewriteRegexList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PathRewriteRegex `json:"items"`
}
