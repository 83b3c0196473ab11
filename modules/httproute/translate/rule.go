package translate

import (
	"fmt"
	"math"
	"regexp"
	"time"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/httproute"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// build translates every rule of r. A route without rules gets the API default: one rule
// matching every path, with no backends.
func build(rc translation.RouteContext, r *gwapiv1.HTTPRoute) []*translation.Entry {
	rules := r.Spec.Rules
	if len(rules) == 0 {
		rules = []gwapiv1.HTTPRouteRule{{}}
	}
	var out []*translation.Entry
	for i := range rules {
		out = append(out, buildRule(rc, i, &rules[i])...)
	}
	return out
}

type builtMatch struct {
	match *httproute.Match
	prec  []int
}

func buildRule(rc translation.RouteContext, i int, rule *gwapiv1.HTTPRouteRule) []*translation.Entry {
	base := fmt.Sprintf("spec.rules[%d]", i)
	matches := ruleMatches(rule)
	ms := make([]builtMatch, 0, len(matches))
	for j, m := range matches {
		hm, prec, err := translateMatch(m)
		if err != nil {
			rc.DropRule(i, fmt.Sprintf("%s.matches[%d].%s", base, j, err.field), gwapiv1.RouteReasonUnsupportedValue, "%s", err.msg)
			return nil
		}
		ms = append(ms, builtMatch{hm, prec})
	}
	env := translation.FilterEnv{Kind: "HTTPRoute", Listener: rc.Listener()}
	if len(ms) == 1 && ms[0].match.Path.Type == httproute.MatchPathPrefix {
		env.HasPrefix, env.Prefix = true, ms[0].match.Path.Value
	}
	action := &irv1.Route{}
	if f := ruleAction(rc, base, rule, env, action); f != nil {
		f.Report(rc, i)
		action.Filters = nil
		action.Backends = []*irv1.Backend{translation.ErrorBackend(f.Error())}
	}
	out := make([]*translation.Entry, 0, len(ms))
	for j, m := range ms {
		out = append(out, &translation.Entry{
			Rule: i, Match: j, Precedence: m.prec,
			Route: &irv1.Route{
				Match:    core.MustConfig(httproute.ModuleID, m.match),
				Filters:  action.Filters,
				Backends: action.Backends,
				Timeouts: action.Timeouts,
				Retry:    action.Retry,
				RuleName: translation.RuleName(rule.Name),
			},
		})
	}
	return out
}

// ruleAction fills what the rule does (filters, backends, timeouts, retry) into r, or says why the
// rule cannot be served. Every backendRef is resolved even then, so ResolvedRefs is complete.
func ruleAction(rc translation.RouteContext, base string, rule *gwapiv1.HTTPRouteRule, env translation.FilterEnv, r *irv1.Route) *translation.Failure {
	var failure *translation.Failure
	keep := func(f *translation.Failure) {
		if failure == nil {
			failure = f
		}
	}
	if to, f := timeouts(rule.Timeouts, base+".timeouts"); f != nil {
		keep(f)
	} else {
		r.Timeouts = to
	}
	if rt, f := retry(rule.Retry, base+".retry"); f != nil {
		keep(f)
	} else {
		r.Retry = rt
	}
	filters, f := rc.Filters(base+".filters", rule.Filters, env)
	if f != nil {
		keep(f)
	}
	r.Filters = filters
	if len(rule.BackendRefs) > 0 {
		for _, x := range rule.Filters {
			if x.Type == gwapiv1.HTTPRouteFilterRequestRedirect {
				keep(translation.Fail(base+".filters", gwapiv1.RouteReasonUnsupportedValue, "RequestRedirect filter must not be used together with backendRefs"))
			}
		}
	}
	for k, br := range rule.BackendRefs {
		field := fmt.Sprintf("%s.backendRefs[%d]", base, k)
		bf, f := rc.Filters(field+".filters", br.Filters, env)
		if f != nil {
			keep(f)
		}
		r.Backends = append(r.Backends, rc.Backend(field, br.BackendRef, bf))
	}
	return failure
}

// durationRE is the Gateway API Duration format (GEP-2257).
var durationRE = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

func parseDuration(d gwapiv1.Duration) (uint32, error) {
	if !durationRE.MatchString(string(d)) {
		return 0, fmt.Errorf("invalid duration %q", d)
	}
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q: %w", d, err)
	}
	ms := v.Milliseconds()
	if ms > math.MaxUint32 {
		ms = math.MaxUint32
	}
	return uint32(ms), nil
}

// timeouts converts rule timeouts; zero means none, as the spec allows for "0s".
func timeouts(t *gwapiv1.HTTPRouteTimeouts, field string) (*irv1.Timeouts, *translation.Failure) {
	if t == nil {
		return nil, nil
	}
	out := &irv1.Timeouts{}
	var err error
	if t.Request != nil {
		if out.RequestMs, err = parseDuration(*t.Request); err != nil {
			return nil, translation.Fail(field+".request", gwapiv1.RouteReasonUnsupportedValue, "%v", err)
		}
	}
	if t.BackendRequest != nil {
		if out.BackendRequestMs, err = parseDuration(*t.BackendRequest); err != nil {
			return nil, translation.Fail(field+".backendRequest", gwapiv1.RouteReasonUnsupportedValue, "%v", err)
		}
	}
	if out.RequestMs != 0 && out.BackendRequestMs > out.RequestMs {
		return nil, translation.Fail(field+".backendRequest", gwapiv1.RouteReasonUnsupportedValue, "backendRequest timeout cannot be longer than request timeout")
	}
	if out.RequestMs == 0 && out.BackendRequestMs == 0 {
		return nil, nil
	}
	return out, nil
}
