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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func init() { core.RegisterModule(Kind{}) }

// Kind is the TLSRoute route kind.
type Kind struct{}

var (
	_ translator.ExclusiveKind = Kind{}
	_ translator.ClusterKind   = Kind{}
	_ features.Provider        = Kind{}
)

// CoxswainModule implements core.Module.
func (Kind) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return Kind{} }}
}

// GroupKind is gateway.networking.k8s.io/TLSRoute.
func (Kind) GroupKind() gwapiv1.RouteGroupKind {
	g := gwapiv1.Group(gwapiv1.GroupName)
	return gwapiv1.RouteGroupKind{Group: &g, Kind: "TLSRoute"}
}

// Protocols is TLS.
func (Kind) Protocols() []gwapiv1.ProtocolType {
	return []gwapiv1.ProtocolType{gwapiv1.TLSProtocolType}
}

// Exclusive implements translator.ExclusiveKind: the oldest TLSRoute of a hostname serves it.
func (Kind) Exclusive() bool { return true }

// ClusterProtocol implements translator.ClusterKind.
func (Kind) ClusterProtocol() irv1.Cluster_Protocol { return irv1.Cluster_TCP }

// GatewayAPIFeatures implements features.Provider: passthrough, termination and both on one port
// are all served by listener.tls with route.tls.
func (Kind) GatewayAPIFeatures() []features.Feature {
	req := []core.ModuleID{tlsroute.ModuleID, "listener.tls"}
	return []features.Feature{
		{Name: gwfeatures.SupportTLSRoute, Requires: req},
		{Name: gwfeatures.SupportTLSRouteModeTerminate, Requires: req},
		{Name: gwfeatures.SupportTLSRouteModeMixed, Requires: req},
	}
}

// Routes wraps the store's TLSRoutes.
func (Kind) Routes(s *translator.Store) []translator.Route {
	out := make([]translator.Route, 0, len(s.TLSRoutes))
	for _, r := range s.TLSRoutes {
		out = append(out, route{r})
	}
	return out
}

type route struct{ r *gwapiv1.TLSRoute }

func (r route) Object() metav1.Object                 { return r.r }
func (r route) ParentRefs() []gwapiv1.ParentReference { return r.r.Spec.ParentRefs }
func (r route) Hostnames() []gwapiv1.Hostname         { return r.r.Spec.Hostnames }
func (r route) Build(rc *translator.RouteContext) []*translator.Entry {
	rules := make([][]gwapiv1.BackendRef, len(r.r.Spec.Rules))
	for i, rule := range r.r.Spec.Rules {
		rules[i] = rule.BackendRefs
	}
	return translator.SingleRule(rc, tlsroute.ModuleID, rules)
}
