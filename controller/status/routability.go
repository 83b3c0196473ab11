package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// withRoutability is addrs, the controller's --status-address, as a Gateway whose translated
// status reports routability (GEP-5093: it then carries AddressesAssigned) must publish them:
// each with an explicit routability, the default, since the Gateway asked for nothing else (the
// translator publishes them itself for a Gateway that did). addrs as they are otherwise.
func withRoutability(addrs []gwapiv1.GatewayStatusAddress, desired []metav1.Condition) []gwapiv1.GatewayStatusAddress {
	if meta.FindStatusCondition(desired, string(gwapiv1.GatewayConditionAddressesAssigned)) == nil {
		return addrs
	}
	out := make([]gwapiv1.GatewayStatusAddress, len(addrs))
	for i, a := range addrs {
		r := gwapiv1.GatewayAddressRoutabilityDefault
		a.Routability = &r
		out[i] = a
	}
	return out
}
