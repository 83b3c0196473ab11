// Package translate is the controller half of route.tcp: it turns TCPRoutes into IR routes for
// the translator's core passes. It registers module "translate.route.tcp".
//
// A TCPRoute attaches to TCP listeners only (a TLS listener's supportedKinds lists TLSRoute, as
// the conformance suite expects). It has no matches: its one rule's backendRefs become the one IR
// route of the listener's virtual host, and when several TCPRoutes attach to one listener the
// oldest wins (then "<namespace>/<name>"); the others stay Accepted, count in attachedRoutes and
// carry a Conflicted condition (translator.ExclusiveKind). Its backends are TCP clusters.
package translate

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/controller/features"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/tcproute"
)

// ModuleID is the translator module this package registers.
const ModuleID = "translate.route.tcp"

func init() { core.RegisterModule(Kind{}) }

// Kind is the TCPRoute route kind.
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

// GroupKind is gateway.networking.k8s.io/TCPRoute.
func (Kind) GroupKind() gwapiv1.RouteGroupKind {
	g := gwapiv1.Group(gwapiv1.GroupName)
	return gwapiv1.RouteGroupKind{Group: &g, Kind: "TCPRoute"}
}

// Protocols is TCP.
func (Kind) Protocols() []gwapiv1.ProtocolType {
	return []gwapiv1.ProtocolType{gwapiv1.TCPProtocolType}
}

// Exclusive implements translator.ExclusiveKind: the oldest TCPRoute of a listener serves it.
func (Kind) Exclusive() bool { return true }

// ClusterProtocol implements translator.ClusterKind.
func (Kind) ClusterProtocol() irv1.Cluster_Protocol { return irv1.Cluster_TCP }

// GatewayAPIFeatures implements features.Provider.
func (Kind) GatewayAPIFeatures() []features.Feature {
	return []features.Feature{{Name: gwfeatures.SupportTCPRoute, Requires: []core.ModuleID{tcproute.ModuleID, "listener.tcp"}}}
}

// Routes wraps the store's TCPRoutes.
func (Kind) Routes(s *translator.Store) []translator.Route {
	out := make([]translator.Route, 0, len(s.TCPRoutes))
	for _, r := range s.TCPRoutes {
		out = append(out, route{r})
	}
	return out
}

type route struct{ r *gwapiv1.TCPRoute }

func (r route) Object() metav1.Object                 { return r.r }
func (r route) ParentRefs() []gwapiv1.ParentReference { return r.r.Spec.ParentRefs }
func (r route) Hostnames() []gwapiv1.Hostname         { return nil }
func (r route) Build(rc *translator.RouteContext) []*translator.Entry {
	rules := make([][]gwapiv1.BackendRef, len(r.r.Spec.Rules))
	for i, rule := range r.r.Spec.Rules {
		rules[i] = rule.BackendRefs
	}
	return translator.SingleRule(rc, tcproute.ModuleID, rules)
}
