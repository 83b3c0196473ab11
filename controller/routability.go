package controller

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"
)

// reportsRoutability says whether the translator reports status.addresses[].routability and
// AddressesAssigned: only when GatewayAddressRoutability is claimed. The claim means the Gateway
// CRDs serve the field; an API server that does not would prune it from every write, which the
// status writer would take for a change to write again.
func reportsRoutability(claimed []gwapiv1.SupportedFeature) bool {
	for _, f := range claimed {
		if f.Name == gwapiv1.FeatureName(gwfeatures.SupportGatewayAddressRoutability) {
			return true
		}
	}
	return false
}
