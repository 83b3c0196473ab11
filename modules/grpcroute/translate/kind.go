// Package translate is the controller half of route.grpc: it turns GRPCRoute rules into IR routes
// for the translator's core passes. It registers module "translate.route.grpc".
//
// Each match of each rule becomes one IR route whose match is a route.grpc config
// (grpcroute.Match); a rule without matches matches every gRPC request. What the API server's CEL
// would reject is checked here too, because standalone mode reads YAML that never went through
// one: a match that cannot be built (an Exact service with invalid characters, a bad RE2 regex, an
// unknown match type) drops its rule with UnsupportedValue; a filter that cannot run as written
// fails its rule, which then answers UNAVAILABLE rather than serving without the filter.
//
// Backends are reached over cleartext HTTP/2 with prior knowledge: the kind's clusters have
// protocol H2C (translation.ClusterKind). A Service port whose appProtocol says nothing gets h2c
// too (Gateway API lets the route kind decide); one that names another protocol does not
// resolve (ResolvedRefs=False, UnsupportedProtocol).
//
// Precedence (GRPCRouteRule.matches, across every rule of every GRPCRoute in a virtual host; the
// hostname criteria are the core's virtual-host order):
//
//  1. More characters in the service, then in the method (Exact or RegularExpression alike).
//  2. More header matches.
//  3. Ties: the oldest route, "<namespace>/<name>", rule index, match index (the core's).
//
// HTTPRoutes and GRPCRoutes never merge: the core gives a listener hostname to the oldest of
// two intersecting routes of the two kinds (translation.HostnameExclusiveKind).
package translate

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// ModuleID is the translator module this package registers.
const ModuleID = "translate.route.grpc"

func init() { core.RegisterModule(Kind{}) }

// Kind is the GRPCRoute route kind.
type Kind struct{}

var (
	_ translation.RouteKind             = Kind{}
	_ translation.ClusterKind           = Kind{}
	_ translation.ErrorAnswerKind       = Kind{}
	_ translation.HostnameExclusiveKind = Kind{}
	_ translation.FeatureProvider       = Kind{}
)

// CoxswainModule implements core.Module.
func (Kind) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return Kind{} }}
}

// API is gateway.networking.k8s.io/v1 GRPCRoute.
func (Kind) API() translation.RouteAPI {
	return translation.NewAPI(schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: "v1", Kind: "GRPCRoute"}, "grpcroutes", gwapiv1.Install,
		func(r *gwapiv1.GRPCRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus }, defaultRoute)
}

// Protocols are HTTP (gRPC over cleartext HTTP/2 with prior knowledge) and HTTPS (ALPN h2).
func (Kind) Protocols() []gwapiv1.ProtocolType {
	return []gwapiv1.ProtocolType{gwapiv1.HTTPProtocolType, gwapiv1.HTTPSProtocolType}
}

// HostnameExclusiveWith implements translation.HostnameExclusiveKind: GRPCRouteSpec.Hostnames
// forbids an HTTPRoute and a GRPCRoute with intersecting hostnames on one listener.
func (Kind) HostnameExclusiveWith() []schema.GroupKind {
	return []schema.GroupKind{{Group: gwapiv1.GroupName, Kind: "HTTPRoute"}}
}

// ErrorAnswer implements translation.ErrorAnswerKind: the engine's 500 for a failed rule reaches
// a gRPC client as a trailers-only response with grpc-status UNAVAILABLE (grpcroute.CodeForHTTP).
func (Kind) ErrorAnswer() string { return "gRPC status UNAVAILABLE" }

// ClusterProtocol implements translation.ClusterKind: gRPC backends speak HTTP/2.
func (Kind) ClusterProtocol() irv1.Cluster_Protocol { return irv1.Cluster_H2C }

// GatewayAPIFeatures implements translation.FeatureProvider. GRPCRoute support includes its core
// filter (RequestHeaderModifier) and ResponseHeaderModifier, which has no feature of its own.
func (Kind) GatewayAPIFeatures() []translation.Feature {
	req := []core.ModuleID{grpcroute.ModuleID, "listener.http", "listener.https",
		headers.RequestModuleID, headers.ResponseModuleID}
	return []translation.Feature{
		{Name: gwfeatures.SupportGRPCRoute, Requires: req},
		{Name: gwfeatures.SupportGRPCRouteNamedRouteRule, Requires: req},
	}
}

// Route wraps one GRPCRoute.
func (Kind) Route(o translation.Object) (translation.Route, bool) {
	r, ok := o.(*gwapiv1.GRPCRoute)
	return route{r}, ok
}

type route struct{ r *gwapiv1.GRPCRoute }

var _ translation.Route = route{}

func (r route) Object() translation.Object                             { return r.r }
func (r route) ParentRefs() []gwapiv1.ParentReference                  { return r.r.Spec.ParentRefs }
func (r route) Hostnames() []gwapiv1.Hostname                          { return r.r.Spec.Hostnames }
func (r route) Build(rc translation.RouteContext) []*translation.Entry { return build(rc, r.r) }
