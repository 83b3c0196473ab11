package translator

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// Store is the world a translation reads: typed Kubernetes objects, filled by the controller's
// informers or by the standalone file loader. Translate never modifies it. Order of the slices does
// not matter; the translator sorts what it emits.
type Store struct {
	GatewayClasses  []*gwapiv1.GatewayClass
	Gateways        []*gwapiv1.Gateway
	HTTPRoutes      []*gwapiv1.HTTPRoute
	GRPCRoutes      []*gwapiv1.GRPCRoute
	TCPRoutes       []*gwapiv1.TCPRoute
	TLSRoutes       []*gwapiv1.TLSRoute
	UDPRoutes       []*gwapiv1.UDPRoute
	ReferenceGrants []*gwapiv1b1.ReferenceGrant
	Services        []*corev1.Service
	EndpointSlices  []*discoveryv1.EndpointSlice
	Secrets         []*corev1.Secret
	Namespaces      []*corev1.Namespace
}
