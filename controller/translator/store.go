package translator

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Store is the world a translation reads, filled by the controller's informers or by the
// standalone file loader. Translate never modifies it. Order of the slices does not matter; the
// translator sorts what it emits.
//
// The kinds the core passes read themselves are typed fields. Every other kind — the objects of
// the registered route kinds and the objects ExtensionRef filters refer to — is in Objects by
// group and kind, so that a new kind needs no field here.
type Store struct {
	GatewayClasses []*gwapiv1.GatewayClass
	Gateways       []*gwapiv1.Gateway
	// ListenerSets add listeners to Gateways that admit them (spec.allowedListeners).
	ListenerSets    []*gwapiv1.ListenerSet
	ReferenceGrants []*gwapiv1b1.ReferenceGrant
	Services        []*corev1.Service
	EndpointSlices  []*discoveryv1.EndpointSlice
	Secrets         []*corev1.Secret
	Namespaces      []*corev1.Namespace
	// ConfigMaps and ClusterTrustBundles hold CA certificates (caCertificateRefs of Gateways
	// and BackendTLSPolicies); a cluster's controller keeps only their ca.crt.
	ConfigMaps          []*corev1.ConfigMap
	ClusterTrustBundles []*certificatesv1.ClusterTrustBundle
	// BackendPolicies configure the clusters of the Services they target.
	BackendPolicies []*policyv1a1.CoxswainBackendPolicy
	// BackendTLSPolicies make the connections to the Services they target TLS.
	BackendTLSPolicies []*gwapiv1.BackendTLSPolicy
	// ClientTrafficPolicies configure the sockets of the Gateway listeners they target.
	ClientTrafficPolicies []*policyv1a1.ClientTrafficPolicy
	// GatewayParameters are what Gateways' and GatewayClasses' parametersRefs name (dedicated
	// mode); the translator checks a reference resolves and is valid.
	GatewayParameters []*infrav1a1.CoxswainGatewayParameters
	// Objects holds route objects (typed, as their kind's RouteAPI.New makes them) and
	// extension objects (typed or unstructured), by GroupKind.
	Objects map[schema.GroupKind][]translation.Object
}

// Add appends objects of group kind gk.
func (s *Store) Add(gk schema.GroupKind, objs ...translation.Object) {
	if s.Objects == nil {
		s.Objects = map[schema.GroupKind][]translation.Object{}
	}
	s.Objects[gk] = append(s.Objects[gk], objs...)
}
