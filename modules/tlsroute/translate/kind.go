// Package translate is the controller half of route.tls: it turns TLSRoutes into IR routes for
// the translator's core passes. It registers module "translate.route.tls".
//
// A TLSRoute attaches to TLS listeners, in Passthrough or Terminate mode, or to one port carrying
// both (listeners told apart by hostname). Its hostnames, intersected with the listener's, are
// the SNI names it serves: the core places it in one virtual host per effective hostname, and the
// proxy selects exact names, then wildcards, then the catch-all. Its one rule's backendRefs are
// the IR route of those virtual hosts; when two TLSRoutes claim one hostname of a listener, the
// oldest wins it and the other carries a Conflicted condition (translation.ExclusiveKind). Its
// backends are TCP clusters: the bytes past the listener are a stream, encrypted or not.
package translate

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/tlsroute"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// ModuleID is the translator module this package registers.
const ModuleID = "translate.route.tls"

func init() { core.RegisterModule(Kind) }

// Passthrough, termination and both on one port are all served by listener.tls with route.tls.
var tlsFeatures = func() []translation.Feature {
	req := []core.ModuleID{tlsroute.ModuleID, "listener.tls"}
	return []translation.Feature{
		{Name: gwfeatures.SupportTLSRoute, Requires: req},
		{Name: gwfeatures.SupportTLSRouteModeTerminate, Requires: req},
		{Name: gwfeatures.SupportTLSRouteModeMixed, Requires: req},
	}
}()

// Kind is the TLSRoute route kind.
var Kind = translation.StreamKind[*gwapiv1.TLSRoute]{
	ID:       ModuleID,
	Match:    tlsroute.ModuleID,
	RouteAPI: api(),
	Protocol: gwapiv1.TLSProtocolType,
	Cluster:  irv1.Cluster_TCP,
	Features: tlsFeatures,
	Spec: func(r *gwapiv1.TLSRoute) translation.StreamSpec {
		rules := translation.BackendRefsOf(r.Spec.Rules, func(x *gwapiv1.TLSRouteRule) []gwapiv1.BackendRef { return x.BackendRefs })
		return translation.StreamSpec{ParentRefs: r.Spec.ParentRefs, Hostnames: r.Spec.Hostnames, Rules: rules,
			RuleName: translation.FirstRuleName(r.Spec.Rules, func(x *gwapiv1.TLSRouteRule) *gwapiv1.SectionName { return x.Name })}
	},
}

// api is gateway.networking.k8s.io/v1 TLSRoute; files may use the older versions, whose schema is v1's
// (v1alpha2 allowed more rules, which the translator reports as dropped).
func api() translation.RouteAPI {
	a := translation.NewAPI[gwapiv1.TLSRoute](schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: "v1", Kind: "TLSRoute"}, "tlsroutes", gwapiv1.Install,
		func(r *gwapiv1.TLSRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus }, nil)
	a.ReadVersions = []string{"v1alpha2", "v1alpha3"}
	return a
}
