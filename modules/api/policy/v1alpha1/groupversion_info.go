package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every kind in this package.
const GroupName = "gateway.coxswain-labs.dev"

// SchemeGroupVersion is the group and version of this package's kinds.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// BackendPolicyKind and BackendPolicyResource name CoxswainBackendPolicy in the API.
const (
	BackendPolicyKind     = "CoxswainBackendPolicy"
	BackendPolicyResource = "coxswainbackendpolicies"
)

// ClientTrafficPolicyKind and ClientTrafficPolicyResource name ClientTrafficPolicy in the API.
const (
	ClientTrafficPolicyKind     = "ClientTrafficPolicy"
	ClientTrafficPolicyResource = "clienttrafficpolicies"
)

var (
	// SchemeBuilder collects the functions that add this package's kinds to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &CoxswainBackendPolicy{}, &CoxswainBackendPolicyList{},
		&ClientTrafficPolicy{}, &ClientTrafficPolicyList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
