package provision

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"
)

// Features are the Gateway API features the shared mode adds to what the binary's modules
// serve; the controller claims them only while it provisions.
//
//   - GatewayInfrastructure: spec.infrastructure.labels and .annotations land on every object
//     provisioned for the Gateway (InfrastructureMetadata; the conformance test reads them on
//     its ServiceAccount).
//   - GatewayAddressRoutabilityCluster: a Gateway's VIP Service has a ClusterIP from the
//     cluster's ServiceCIDR, which is what routability Cluster promises (GEP-5093); an entry
//     asking for it is satisfied by that address (translator.Provisioned.ClusterIPs).
func Features() []gwapiv1.SupportedFeature {
	return []gwapiv1.SupportedFeature{
		{Name: gwapiv1.FeatureName(gwfeatures.SupportGatewayInfrastructure)},
		{Name: gwapiv1.FeatureName(gwfeatures.SupportGatewayAddressRoutabilityCluster)},
	}
}
