// Package translate is the controller half of route.udp: it turns UDPRoutes into IR routes for
// the translator's core passes. It registers module "translate.route.udp".
//
// A UDPRoute attaches to UDP listeners. It has no matches: its one rule's backendRefs become the
// one IR route of the listener's virtual host, and when several UDPRoutes attach to one listener
// the oldest wins (then "<namespace>/<name>"); the others stay Accepted, count in attachedRoutes
// and carry a Conflicted condition (translation.ExclusiveKind). Its backends are UDP clusters,
// made of the Service ports declared with protocol UDP.
package translate

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
	"github.com/coxswain-labs/coxswain/modules/udproute"
)

// ModuleID is the translator module this package registers.
const ModuleID = "translate.route.udp"

func init() { core.RegisterModule(Kind) }

// Kind is the UDPRoute route kind.
var Kind = translation.StreamKind[*gwapiv1.UDPRoute]{
	ID:       ModuleID,
	Match:    udproute.ModuleID,
	RouteAPI: api(),
	Protocol: gwapiv1.UDPProtocolType,
	Cluster:  irv1.Cluster_UDP,
	Features: []translation.Feature{{Name: gwfeatures.SupportUDPRoute, Requires: []core.ModuleID{udproute.ModuleID, "listener.udp"}}},
	Spec: func(r *gwapiv1.UDPRoute) translation.StreamSpec {
		rules := translation.BackendRefsOf(r.Spec.Rules, func(x *gwapiv1.UDPRouteRule) []gwapiv1.BackendRef { return x.BackendRefs })
		return translation.StreamSpec{ParentRefs: r.Spec.ParentRefs, Hostnames: nil, Rules: rules,
			RuleName: translation.FirstRuleName(r.Spec.Rules, func(x *gwapiv1.UDPRouteRule) *gwapiv1.SectionName { return x.Name })}
	},
}

// api is gateway.networking.k8s.io/v1 UDPRoute; files may use the older versions, whose schema is v1's
// (v1alpha2 allowed more rules, which the translator reports as dropped).
func api() translation.RouteAPI {
	a := translation.NewAPI[gwapiv1.UDPRoute](schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: "v1", Kind: "UDPRoute"}, "udproutes", gwapiv1.Install,
		func(r *gwapiv1.UDPRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus }, nil)
	a.ReadVersions = []string{"v1alpha2"}
	return a
}
