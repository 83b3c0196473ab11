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

// GatewayParametersKind and GatewayParametersResource name CoxswainGatewayParameters in the API.
const (
	GatewayParametersKind     = "CoxswainGatewayParameters"
	GatewayParametersResource = "coxswaingatewayparameters"
)

var (
	// SchemeBuilder collects the functions that add this package's kinds to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &CoxswainGatewayParameters{}, &CoxswainGatewayParametersList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
