package translate

import (
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// build translates every rule of r. A route without rules routes nothing (the API has no
// default rule for GRPCRoute).
func build(rc translation.RouteContext, r *gwapiv1.GRPCRoute) []*translation.Entry {
	var out []*translation.Entry
	for i := range r.Spec.Rules {
		out = append(out, buildRule(rc, i, &r.Spec.Rules[i])...)
	}
	return out
}

type builtMatch struct {
	match *grpcroute.Match
	prec  []int
}

func buildRule(rc translation.RouteContext, i int, rule *gwapiv1.GRPCRouteRule) []*translation.Entry {
	base := fmt.Sprintf("spec.rules[%d]", i)
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gwapiv1.GRPCRouteMatch{{}} // every gRPC request
	}
	ms := make([]builtMatch, 0, len(matches))
	for j, m := range matches {
		gm, prec, err := translateMatch(m)
		if err != nil {
			rc.DropRule(i, fmt.Sprintf("%s.matches[%d].%s", base, j, err.field), gwapiv1.RouteReasonUnsupportedValue, "%s", err.msg)
			return nil
		}
		ms = append(ms, builtMatch{gm, prec})
	}
	action := &irv1.Route{}
	if f := ruleAction(rc, base, rule, action); f != nil {
		f.Report(rc, i)
		action.Filters = nil
		action.Backends = []*irv1.Backend{translation.ErrorBackend(f.Error())}
	}
	out := make([]*translation.Entry, 0, len(ms))
	for j, m := range ms {
		out = append(out, &translation.Entry{
			Rule: i, Match: j, Precedence: m.prec,
			Route: &irv1.Route{
				Match:    core.MustConfig(grpcroute.ModuleID, m.match),
				Filters:  action.Filters,
				Backends: action.Backends,
				RuleName: translation.RuleName(rule.Name),
			},
		})
	}
	return out
}

// filterTypes are the filter types GRPCRouteFilter has.
var filterTypes = []gwapiv1.HTTPRouteFilterType{
	gwapiv1.HTTPRouteFilterType(gwapiv1.GRPCRouteFilterRequestHeaderModifier),
	gwapiv1.HTTPRouteFilterType(gwapiv1.GRPCRouteFilterResponseHeaderModifier),
	gwapiv1.HTTPRouteFilterType(gwapiv1.GRPCRouteFilterRequestMirror),
	gwapiv1.HTTPRouteFilterType(gwapiv1.GRPCRouteFilterExtensionRef),
}

// ruleAction fills the rule's filters and backends into r, or says why the rule cannot be
// served. Every backendRef is resolved even then, so ResolvedRefs is complete.
func ruleAction(rc translation.RouteContext, base string, rule *gwapiv1.GRPCRouteRule, r *irv1.Route) *translation.Failure {
	var failure *translation.Failure
	keep := func(f *translation.Failure) {
		if failure == nil {
			failure = f
		}
	}
	env := translation.FilterEnv{Kind: "GRPCRoute", Types: filterTypes, Listener: rc.Listener()}
	filters, f := rc.Filters(base+".filters", translation.GRPCFilters(rule.Filters), env)
	if f != nil {
		keep(f)
	}
	r.Filters = filters
	// Deprecated in v1.7.0 (GEP-4894 moves it to Backend), but v1.6 CRDs still accept it: a rule
	// that sets it is refused rather than served without the persistence it asked for.
	if rule.SessionPersistence != nil { //nolint:staticcheck // see above
		keep(translation.Fail(base+".sessionPersistence", gwapiv1.RouteReasonUnsupportedValue, "session persistence is not supported"))
	}
	for k, br := range rule.BackendRefs {
		field := fmt.Sprintf("%s.backendRefs[%d]", base, k)
		bf, f := rc.Filters(field+".filters", translation.GRPCFilters(br.Filters), env)
		if f != nil {
			keep(f)
		}
		r.Backends = append(r.Backends, rc.Backend(field, br.BackendRef, bf))
	}
	return failure
}
