// Package translate is the controller half of route.tls: it turns TLSRoutes into IR routes for
// the translator's core passes. It registers module "translate.route.tls".
//
// A TLSRoute attaches to TLS listeners, in Passthrough or Terminate mode, or to one port carrying
// both (listeners told apart by hostname). Its hostnames, intersected with the listener's, are
// the SNI names it serves: the core places it in one virtual host per effective hostname, and the
// proxy selects exact names, then wildcards, then the catch-all. Its one rule's backendRefs are
// the IR route of those virtual hosts; when two TLSRoutes claim one hostname of a listener, the
// oldest wins it and the other carries a Conflicted condition (translator.ExclusiveKind). Its
// backends are TCP clusters: the bytes past the listener are a stream, encrypted or not.
package translate

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/controller/features"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/tlsroute"
)

// ModuleID is the translator module this package registers.
const ModuleID = "translate.route.tls"

func init() { core.RegisterModule(Kind) }

// Passthrough, termination and both on one port are all served by listener.tls with route.tls.
var tlsFeatures = func() []features.Feature {
	req := []core.ModuleID{tlsroute.ModuleID, "listener.tls"}
	return []features.Feature{
		{Name: gwfeatures.SupportTLSRoute, Requires: req},
		{Name: gwfeatures.SupportTLSRouteModeTerminate, Requires: req},
		{Name: gwfeatures.SupportTLSRouteModeMixed, Requires: req},
	}
}()

// Kind is the TLSRoute route kind.
var Kind = translator.StreamKind[*gwapiv1.TLSRoute]{
	ID:       ModuleID,
	Match:    tlsroute.ModuleID,
	Kind:     "TLSRoute",
	Protocol: gwapiv1.TLSProtocolType,
	Cluster:  irv1.Cluster_TCP,
	Features: tlsFeatures,
	List:     func(s *translator.Store) []*gwapiv1.TLSRoute { return s.TLSRoutes },
	Spec: func(r *gwapiv1.TLSRoute) translator.StreamSpec {
		rules := make([][]gwapiv1.BackendRef, len(r.Spec.Rules))
		for i, rule := range r.Spec.Rules {
			rules[i] = rule.BackendRefs
		}
		return translator.StreamSpec{ParentRefs: r.Spec.ParentRefs, Hostnames: r.Spec.Hostnames, Rules: rules}
	},
}
