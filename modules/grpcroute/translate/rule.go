package translate

import (
	"fmt"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
)

// build translates every rule of r. A route without rules routes nothing (the API has no
// default rule for GRPCRoute).
func build(rc *translator.RouteContext, r *gwapiv1.GRPCRoute) []*translator.Entry {
	var out []*translator.Entry
	for i := range r.Spec.Rules {
		out = append(out, buildRule(rc, i, &r.Spec.Rules[i])...)
	}
	return out
}

type builtMatch struct {
	match *grpcroute.Match
	prec  []int
}

func buildRule(rc *translator.RouteContext, i int, rule *gwapiv1.GRPCRouteRule) []*translator.Entry {
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
		if f.unresolved {
			rc.Unresolved(f.field, f.reason, "%s", f.msg)
		} else {
			rc.FailRule(i, f.field, f.reason, "%s", f.msg)
		}
		action.Filters = nil
		action.Backends = []*irv1.Backend{translator.ErrorBackend(f.field + ": " + f.msg)}
	}
	out := make([]*translator.Entry, 0, len(ms))
	for j, m := range ms {
		out = append(out, &translator.Entry{
			Rule: i, Match: j, Precedence: m.prec,
			Route: &irv1.Route{
				Match:    core.MustConfig(grpcroute.ModuleID, m.match),
				Filters:  action.Filters,
				Backends: action.Backends,
			},
		})
	}
	return out
}

// ruleFailure is why a rule cannot be served as written: an unresolved reference
// (ResolvedRefs=False) or a rule that fails (FailRule). Either way its routes answer an error.
type ruleFailure struct {
	field      string
	reason     gwapiv1.RouteConditionReason
	msg        string
	unresolved bool
}

func fail(field string, reason gwapiv1.RouteConditionReason, format string, args ...any) *ruleFailure {
	return &ruleFailure{field: field, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// ruleAction fills the rule's filters and backends into r, or says why the rule cannot be
// served. Every backendRef is resolved even then, so ResolvedRefs is complete.
func ruleAction(rc *translator.RouteContext, base string, rule *gwapiv1.GRPCRouteRule, r *irv1.Route) *ruleFailure {
	var failure *ruleFailure
	keep := func(f *ruleFailure) {
		if failure == nil {
			failure = f
		}
	}
	filters, f := translateFilters(rule.Filters, base+".filters")
	if f != nil {
		keep(f)
	}
	r.Filters = filters
	if rule.SessionPersistence != nil {
		keep(fail(base+".sessionPersistence", gwapiv1.RouteReasonUnsupportedValue, "session persistence is not supported"))
	}
	for k, br := range rule.BackendRefs {
		field := fmt.Sprintf("%s.backendRefs[%d]", base, k)
		bf, f := translateFilters(br.Filters, field+".filters")
		if f != nil {
			keep(f)
		}
		r.Backends = append(r.Backends, rc.Backend(field, br.BackendRef, bf))
	}
	return failure
}

// translateFilters turns one filter list (field is its path, e.g. "spec.rules[0].filters") into
// module configs, in order.
func translateFilters(fs []gwapiv1.GRPCRouteFilter, field string) ([]*irv1.ModuleConfig, *ruleFailure) {
	seen := map[gwapiv1.GRPCRouteFilterType]bool{}
	var out []*irv1.ModuleConfig
	for i, f := range fs {
		ff := fmt.Sprintf("%s[%d]", field, i)
		if seen[f.Type] && f.Type != gwapiv1.GRPCRouteFilterRequestMirror && f.Type != gwapiv1.GRPCRouteFilterExtensionRef {
			return nil, fail(ff+".type", gwapiv1.RouteReasonUnsupportedValue, "%s filter cannot be repeated", f.Type)
		}
		seen[f.Type] = true
		mc, err := translateFilter(f, ff)
		if err != nil {
			return nil, err
		}
		out = append(out, mc)
	}
	return out, nil
}

func translateFilter(f gwapiv1.GRPCRouteFilter, field string) (*irv1.ModuleConfig, *ruleFailure) {
	missing := func(name string) *ruleFailure {
		return fail(field+"."+name, gwapiv1.RouteReasonUnsupportedValue, "%s must be set for filter type %s", name, f.Type)
	}
	switch f.Type {
	case gwapiv1.GRPCRouteFilterRequestHeaderModifier:
		if f.RequestHeaderModifier == nil {
			return nil, missing("requestHeaderModifier")
		}
		return headerFilter(headers.RequestModuleID, f.RequestHeaderModifier, field+".requestHeaderModifier")
	case gwapiv1.GRPCRouteFilterResponseHeaderModifier:
		if f.ResponseHeaderModifier == nil {
			return nil, missing("responseHeaderModifier")
		}
		return headerFilter(headers.ResponseModuleID, f.ResponseHeaderModifier, field+".responseHeaderModifier")
	case gwapiv1.GRPCRouteFilterExtensionRef:
		if f.ExtensionRef == nil {
			return nil, missing("extensionRef")
		}
		r := f.ExtensionRef
		kind := string(r.Kind)
		if r.Group != "" {
			kind += "." + string(r.Group)
		}
		return nil, &ruleFailure{field: field + ".extensionRef", reason: gwapiv1.RouteReasonInvalidKind, unresolved: true,
			msg: fmt.Sprintf("ExtensionRef %s %s cannot be resolved: no extension filters are supported yet", kind, r.Name)}
	case gwapiv1.GRPCRouteFilterRequestMirror:
		return nil, fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "filter type %s is not supported yet", f.Type)
	}
	return nil, fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "unknown filter type %q", f.Type)
}

// headerFilter validates an HTTPHeaderFilter as the API would (header names, each name once per
// list) and builds the header modifier's config.
func headerFilter(id core.ModuleID, h *gwapiv1.HTTPHeaderFilter, field string) (*irv1.ModuleConfig, *ruleFailure) {
	var cfg headers.Config
	seen := map[string]map[string]bool{"set": {}, "add": {}, "remove": {}}
	check := func(list, name string) *ruleFailure {
		if !headerName.MatchString(name) {
			return fail(field+"."+list, gwapiv1.RouteReasonUnsupportedValue, "invalid header name %q", name)
		}
		k := strings.ToLower(name)
		if seen[list][k] && list != "remove" {
			return fail(field+"."+list, gwapiv1.RouteReasonUnsupportedValue, "header %q is listed twice", name)
		}
		seen[list][k] = true
		return nil
	}
	for _, x := range h.Set {
		if err := check("set", string(x.Name)); err != nil {
			return nil, err
		}
		cfg.Set = append(cfg.Set, headers.Header{Name: string(x.Name), Value: x.Value})
	}
	for _, x := range h.Add {
		if err := check("add", string(x.Name)); err != nil {
			return nil, err
		}
		cfg.Add = append(cfg.Add, headers.Header{Name: string(x.Name), Value: x.Value})
	}
	for _, name := range h.Remove {
		dup := seen["remove"][strings.ToLower(name)]
		if err := check("remove", name); err != nil {
			return nil, err
		}
		if !dup {
			cfg.Remove = append(cfg.Remove, name)
		}
	}
	return core.MustConfig(id, cfg), nil
}
