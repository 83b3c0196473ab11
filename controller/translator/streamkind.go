package translator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/features"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// StreamKind is a whole route kind for a route type without matches (TCPRoute, TLSRoute,
// UDPRoute). Such kinds differ only in their resource, listener protocol, cluster protocol,
// features and field layout, so each package declares one StreamKind value with those and
// registers it; the behaviour (exclusive attachment, one rule, its own clusters) is shared here.
type StreamKind[R metav1.Object] struct {
	// ID is the translator module, "translate.route.<name>".
	ID core.ModuleID
	// Match is the proxy-side route module the IR routes name.
	Match core.ModuleID
	// Kind is the resource kind in group gateway.networking.k8s.io.
	Kind gwapiv1.Kind
	// Protocol is the one listener protocol the kind attaches to.
	Protocol gwapiv1.ProtocolType
	// Cluster is the protocol of the clusters its backendRefs resolve to.
	Cluster irv1.Cluster_Protocol
	// Features are the Gateway API features the kind makes servable.
	Features []features.Feature
	// List returns the kind's objects in the store.
	List func(*Store) []R
	// Spec reads one object's fields.
	Spec func(R) StreamSpec
}

// StreamSpec is what the core passes read of a route without matches.
type StreamSpec struct {
	ParentRefs []gwapiv1.ParentReference
	Hostnames  []gwapiv1.Hostname
	// Rules are each rule's backendRefs; only the first can receive traffic (see SingleRule).
	Rules [][]gwapiv1.BackendRef
}

var (
	_ ExclusiveKind     = StreamKind[*gwapiv1.TCPRoute]{}
	_ ClusterKind       = StreamKind[*gwapiv1.TCPRoute]{}
	_ features.Provider = StreamKind[*gwapiv1.TCPRoute]{}
)

// CoxswainModule implements core.Module.
func (k StreamKind[R]) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: k.ID, New: func() core.Module { return k }}
}

// GroupKind implements RouteKind.
func (k StreamKind[R]) GroupKind() gwapiv1.RouteGroupKind {
	g := gwapiv1.Group(gwapiv1.GroupName)
	return gwapiv1.RouteGroupKind{Group: &g, Kind: k.Kind}
}

// Protocols implements RouteKind.
func (k StreamKind[R]) Protocols() []gwapiv1.ProtocolType { return []gwapiv1.ProtocolType{k.Protocol} }

// Exclusive implements ExclusiveKind: the oldest route of a virtual host serves it.
func (StreamKind[R]) Exclusive() bool { return true }

// ClusterProtocol implements ClusterKind.
func (k StreamKind[R]) ClusterProtocol() irv1.Cluster_Protocol { return k.Cluster }

// GatewayAPIFeatures implements features.Provider.
func (k StreamKind[R]) GatewayAPIFeatures() []features.Feature {
	return append([]features.Feature(nil), k.Features...)
}

// Routes implements RouteKind.
func (k StreamKind[R]) Routes(s *Store) []Route {
	objs := k.List(s)
	out := make([]Route, 0, len(objs))
	for _, o := range objs {
		out = append(out, streamKindRoute{obj: o, spec: k.Spec(o), match: k.Match})
	}
	return out
}

type streamKindRoute struct {
	obj   metav1.Object
	spec  StreamSpec
	match core.ModuleID
}

func (r streamKindRoute) Object() metav1.Object                 { return r.obj }
func (r streamKindRoute) ParentRefs() []gwapiv1.ParentReference { return r.spec.ParentRefs }
func (r streamKindRoute) Hostnames() []gwapiv1.Hostname         { return r.spec.Hostnames }
func (r streamKindRoute) Build(rc *RouteContext) []*Entry {
	return SingleRule(rc, r.match, r.spec.Rules)
}
