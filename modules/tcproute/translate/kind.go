// Package translate is the controller half of route.tcp: it turns TCPRoutes into IR routes for
// the translator's core passes. It registers module "translate.route.tcp".
//
// A TCPRoute attaches to TCP listeners only (a TLS listener's supportedKinds lists TLSRoute, as
// the conformance suite expects). It has no matches: its one rule's backendRefs become the one IR
// route of the listener's virtual host, and when several TCPRoutes attach to one listener the
// oldest wins (then "<namespace>/<name>"); the others stay Accepted, count in attachedRoutes and
// carry a Conflicted condition (translation.ExclusiveKind). Its backends are TCP clusters.
package translate

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/tcproute"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// ModuleID is the translator module this package registers.
const ModuleID = "translate.route.tcp"

func init() { core.RegisterModule(Kind) }

// Kind is the TCPRoute route kind.
var Kind = translation.StreamKind[*gwapiv1.TCPRoute]{
	ID:       ModuleID,
	Match:    tcproute.ModuleID,
	RouteAPI: api(),
	Protocol: gwapiv1.TCPProtocolType,
	Cluster:  irv1.Cluster_TCP,
	Features: []translation.Feature{{Name: gwfeatures.SupportTCPRoute, Requires: []core.ModuleID{tcproute.ModuleID, "listener.tcp"}}},
	Spec: func(r *gwapiv1.TCPRoute) translation.StreamSpec {
		rules := translation.BackendRefsOf(r.Spec.Rules, func(x *gwapiv1.TCPRouteRule) []gwapiv1.BackendRef { return x.BackendRefs })
		return translation.StreamSpec{ParentRefs: r.Spec.ParentRefs, Hostnames: nil, Rules: rules,
			RuleName: translation.FirstRuleName(r.Spec.Rules, func(x *gwapiv1.TCPRouteRule) *gwapiv1.SectionName { return x.Name })}
	},
}

// api is gateway.networking.k8s.io/v1 TCPRoute; files may use the older versions, whose schema is v1's
// (v1alpha2 allowed more rules, which the translator reports as dropped).
func api() translation.RouteAPI {
	a := translation.NewAPI[gwapiv1.TCPRoute](schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: "v1", Kind: "TCPRoute"}, "tcproutes", gwapiv1.Install,
		func(r *gwapiv1.TCPRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus }, nil)
	a.ReadVersions = []string{"v1alpha2"}
	return a
}
