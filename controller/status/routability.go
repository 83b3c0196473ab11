package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fallbackAddresses are the addresses to publish for a Gateway whose translated status has none:
// the controller's --status-address, unless the translator reports routability (GEP-5093: its
// status then carries AddressesAssigned). Such a translator publishes --status-address itself,
// with the routability asked for, for every Gateway they satisfy, so a Gateway it gave none has
// none: publishing them anyway would report an address for an entry that is not satisfied.
func fallbackAddresses(addrs []gwapiv1.GatewayStatusAddress, desired []metav1.Condition) []gwapiv1.GatewayStatusAddress {
	if meta.FindStatusCondition(desired, string(gwapiv1.GatewayConditionAddressesAssigned)) != nil {
		return nil
	}
	return addrs
}
