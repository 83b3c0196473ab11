package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"example.com/hmacsign"
)

// HMACSignature signs the requests of the HTTPRoute rules that reference it with an
// ExtensionRef filter {group: hmacsign.example.com, kind: HMACSignature, name: ...}.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=hmacsig
// +kubebuilder:printcolumn:name="Header",type=string,JSONPath=`.spec.header`
// +kubebuilder:printcolumn:name="Key ID",type=string,JSONPath=`.spec.keyID`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type HMACSignature struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec hmacsign.Config `json:"spec"`
}

// HMACSignatureList is a list of HMACSignature.
//
// +kubebuilder:object:root=true
type HMACSignatureList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HMACSignature `json:"items"`
}
