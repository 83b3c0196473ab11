package translation

import (
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// StreamKind is a whole route kind for a route type without matches (TCPRoute, TLSRoute,
// UDPRoute). Such kinds differ only in their resource, listener protocol, cluster protocol,
// features and field layout, so each package declares one StreamKind value with those and
// registers it; the behaviour (exclusive attachment, one rule, its own clusters, defaulting) is
// shared here.
type StreamKind[P Object] struct {
	// ID is the translator module, "translate.route.<name>".
	ID core.ModuleID
	// Match is the proxy-side route module the IR routes name.
	Match core.ModuleID
	// RouteAPI is the resource (NewAPI; its Default is filled from Spec).
	RouteAPI RouteAPI
	// Protocol is the one listener protocol the kind attaches to.
	Protocol gwapiv1.ProtocolType
	// Cluster is the protocol of the clusters its backendRefs resolve to.
	Cluster irv1.Cluster_Protocol
	// Features are the Gateway API features the kind makes servable.
	Features []Feature
	// Spec reads one object's fields. Its slices alias the object's, which defaulting relies on.
	Spec func(P) StreamSpec
}

// StreamSpec is what the core passes read of a route without matches.
type StreamSpec struct {
	ParentRefs []gwapiv1.ParentReference
	Hostnames  []gwapiv1.Hostname
	// Rules are each rule's backendRefs; only the first can receive traffic (see SingleRule).
	Rules [][]gwapiv1.BackendRef
	// RuleName is the first rule's name ("" when it has none).
	RuleName string
}

// RuleName is a route rule's name as the IR carries it: "" for a rule without one.
func RuleName(n *gwapiv1.SectionName) string {
	if n == nil {
		return ""
	}
	return string(*n)
}

// FirstRuleName is the name of rules[0], "" when there is none or it has no name.
func FirstRuleName[R any](rules []R, name func(*R) *gwapiv1.SectionName) string {
	if len(rules) == 0 {
		return ""
	}
	return RuleName(name(&rules[0]))
}

var (
	_ ExclusiveKind   = StreamKind[*gwapiv1.TCPRoute]{}
	_ ClusterKind     = StreamKind[*gwapiv1.TCPRoute]{}
	_ FeatureProvider = StreamKind[*gwapiv1.TCPRoute]{}
)

// CoxswainModule implements core.Module.
func (k StreamKind[P]) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: k.ID, New: func() core.Module { return k }}
}

// API implements RouteKind; defaulting fills the parentRefs' and backendRefs' group and kind.
func (k StreamKind[P]) API() RouteAPI {
	api := k.RouteAPI
	api.Default = func(o Object) {
		if p, ok := o.(P); ok {
			s := k.Spec(p)
			DefaultParentRefs(s.ParentRefs)
			for _, refs := range s.Rules {
				DefaultBackendRefs(refs)
			}
		}
	}
	return api
}

// Protocols implements RouteKind.
func (k StreamKind[P]) Protocols() []gwapiv1.ProtocolType { return []gwapiv1.ProtocolType{k.Protocol} }

// Exclusive implements ExclusiveKind: the oldest route of a virtual host serves it.
func (StreamKind[P]) Exclusive() bool { return true }

// ClusterProtocol implements ClusterKind.
func (k StreamKind[P]) ClusterProtocol() irv1.Cluster_Protocol { return k.Cluster }

// GatewayAPIFeatures implements FeatureProvider.
func (k StreamKind[P]) GatewayAPIFeatures() []Feature {
	return append([]Feature(nil), k.Features...)
}

// Route implements RouteKind.
func (k StreamKind[P]) Route(o Object) (Route, bool) {
	p, ok := o.(P)
	if !ok {
		return nil, false
	}
	return streamRoute{obj: p, spec: k.Spec(p), match: k.Match}, true
}

type streamRoute struct {
	obj   Object
	spec  StreamSpec
	match core.ModuleID
}

func (r streamRoute) Object() Object                        { return r.obj }
func (r streamRoute) ParentRefs() []gwapiv1.ParentReference { return r.spec.ParentRefs }
func (r streamRoute) Hostnames() []gwapiv1.Hostname         { return r.spec.Hostnames }
func (r streamRoute) Build(rc RouteContext) []*Entry {
	entries := SingleRule(rc, r.match, r.spec.Rules)
	for _, e := range entries {
		e.Route.RuleName = r.spec.RuleName
	}
	return entries
}

// SingleRule builds the entry of a route kind without matches (TCPRoute, TLSRoute, UDPRoute):
// one IR route whose match module is id and whose backends are rule 0's backendRefs. Such a
// route can only ever serve one rule; v1 allows exactly one, and the later rules v1alpha2
// allowed are dropped with a condition. A route without rules, or a rule without backendRefs,
// gets an entry without backends, which rejects its connections as the spec asks.
func SingleRule(rc RouteContext, id core.ModuleID, rules [][]gwapiv1.BackendRef) []*Entry {
	for i := 1; i < len(rules); i++ {
		rc.DropRule(i, fmt.Sprintf("spec.rules[%d]", i), gwapiv1.RouteReasonUnsupportedValue,
			"only the first rule of a route without matches can receive traffic")
	}
	route := &irv1.Route{Match: &irv1.ModuleConfig{Id: string(id)}}
	if len(rules) > 0 {
		for j, ref := range rules[0] {
			route.Backends = append(route.Backends, rc.Backend(fmt.Sprintf("spec.rules[0].backendRefs[%d]", j), ref, nil))
		}
	}
	return []*Entry{{Rule: 0, Match: 0, Route: route}}
}

// BackendRefsOf is each rule's backendRefs, for StreamSpec.Rules. The slices alias the rules'
// own, which StreamKind's defaulting relies on.
func BackendRefsOf[R any](rules []R, refs func(*R) []gwapiv1.BackendRef) [][]gwapiv1.BackendRef {
	out := make([][]gwapiv1.BackendRef, len(rules))
	for i := range rules {
		out[i] = refs(&rules[i])
	}
	return out
}
