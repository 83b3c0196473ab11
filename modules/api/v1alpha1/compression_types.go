package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/compression"
)

// CompressionSpec is the config of the filter.ext.gateway.coxswain-labs.dev.Compression module
// itself; its validation markers live on compression.Config.
type CompressionSpec = compression.Config

// Compression compresses the response bodies of a rule with gzip or brotli, for the clients that
// accept them. An HTTPRoute rule uses it with an ExtensionRef filter {group:
// gateway.coxswain-labs.dev, kind: Compression, name: ...} naming an object in the route's
// namespace. It has no status: the routes that reference it report on it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=coxswain,shortName=cmp
// +kubebuilder:printcolumn:name="Gzip",type=boolean,JSONPath=`.spec.gzip`
// +kubebuilder:printcolumn:name="Brotli",type=boolean,JSONPath=`.spec.brotli`
// +kubebuilder:printcolumn:name="Level",type=integer,JSONPath=`.spec.level`
// +kubebuilder:printcolumn:name="MinSize",type=integer,JSONPath=`.spec.minSize`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Compression struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the Compression configuration.
	// +required
	Spec compression.Config `json:"spec"` // the type, not its alias: controller-gen's deepcopy does not see through aliases
}

// CompressionList is a list of Compression.
//
// +kubebuilder:object:root=true
type CompressionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Compression `json:"items"`
}
