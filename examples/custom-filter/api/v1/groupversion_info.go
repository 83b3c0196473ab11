package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemeGroupVersion is the group and version of this package's kinds.
var SchemeGroupVersion = schema.GroupVersion{Group: "hmacsign.example.com", Version: "v1"}

var (
	// SchemeBuilder collects the functions that add this package's kinds to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &HMACSignature{}, &HMACSignatureList{})
		metav1.AddToGroupVersion(s, SchemeGroupVersion)
		return nil
	})
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
