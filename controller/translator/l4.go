package translator

import (
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// SingleRule builds the entry of a route kind without matches (TCPRoute, TLSRoute, UDPRoute):
// one IR route whose match module is id and whose backends are rule 0's backendRefs. Such a
// route can only ever serve one rule; v1 allows exactly one, and the later rules v1alpha2
// allowed are dropped with a condition. A route without rules, or a rule without backendRefs,
// gets an entry without backends, which rejects its connections as the spec asks.
func SingleRule(rc *RouteContext, id core.ModuleID, rules [][]gwapiv1.BackendRef) []*Entry {
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
