package translate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/filters/pathmod"
	"github.com/coxswain-labs/coxswain/modules/filters/redirect"
	"github.com/coxswain-labs/coxswain/modules/filters/rewrite"
)

// ruleFailure is why a rule cannot be served as written. With unresolved set it is a reference
// that does not resolve (ResolvedRefs=False); otherwise the rule fails (FailRule). Either way its
// routes answer 500.
type ruleFailure struct {
	field      string
	reason     gwapiv1.RouteConditionReason
	msg        string
	unresolved bool
}

func fail(field string, reason gwapiv1.RouteConditionReason, format string, args ...any) *ruleFailure {
	return &ruleFailure{field: field, reason: reason, msg: fmt.Sprintf(format, args...)}
}

// filterEnv is what filter translation needs to know about the rule and listener.
type filterEnv struct {
	listener translator.ListenerInfo
	// prefix is the PathPrefix value ReplacePrefixMatch replaces; prefixOK says the rule has the
	// single PathPrefix match the API requires for ReplacePrefixMatch.
	prefix   string
	prefixOK bool
}

// repeatable are the filter types the API allows more than once per list.
var repeatable = map[gwapiv1.HTTPRouteFilterType]bool{
	gwapiv1.HTTPRouteFilterRequestMirror: true,
	gwapiv1.HTTPRouteFilterExtensionRef:  true,
}

// translateFilters turns one filter list (field is its path, e.g. "spec.rules[0].filters") into
// module configs, in order.
func translateFilters(fs []gwapiv1.HTTPRouteFilter, field string, env filterEnv) ([]*irv1.ModuleConfig, *ruleFailure) {
	seen := map[gwapiv1.HTTPRouteFilterType]bool{}
	var out []*irv1.ModuleConfig
	for i, f := range fs {
		ff := fmt.Sprintf("%s[%d]", field, i)
		if seen[f.Type] && !repeatable[f.Type] {
			return nil, fail(ff+".type", gwapiv1.RouteReasonUnsupportedValue, "%s filter cannot be repeated", f.Type)
		}
		seen[f.Type] = true
		mc, err := translateFilter(f, ff, env)
		if err != nil {
			return nil, err
		}
		out = append(out, mc)
	}
	if seen[gwapiv1.HTTPRouteFilterRequestRedirect] && seen[gwapiv1.HTTPRouteFilterURLRewrite] {
		return nil, fail(field, gwapiv1.RouteReasonIncompatibleFilters, "RequestRedirect and URLRewrite filters cannot be combined")
	}
	return out, nil
}

func translateFilter(f gwapiv1.HTTPRouteFilter, field string, env filterEnv) (*irv1.ModuleConfig, *ruleFailure) {
	missing := func(name string) *ruleFailure {
		return fail(field+"."+name, gwapiv1.RouteReasonUnsupportedValue, "%s must be set for filter type %s", name, f.Type)
	}
	switch f.Type {
	case gwapiv1.HTTPRouteFilterRequestHeaderModifier:
		if f.RequestHeaderModifier == nil {
			return nil, missing("requestHeaderModifier")
		}
		return headerFilter(headers.RequestModuleID, f.RequestHeaderModifier, field+".requestHeaderModifier")
	case gwapiv1.HTTPRouteFilterResponseHeaderModifier:
		if f.ResponseHeaderModifier == nil {
			return nil, missing("responseHeaderModifier")
		}
		return headerFilter(headers.ResponseModuleID, f.ResponseHeaderModifier, field+".responseHeaderModifier")
	case gwapiv1.HTTPRouteFilterRequestRedirect:
		if f.RequestRedirect == nil {
			return nil, missing("requestRedirect")
		}
		return redirectFilter(f.RequestRedirect, field+".requestRedirect", env)
	case gwapiv1.HTTPRouteFilterURLRewrite:
		if f.URLRewrite == nil {
			return nil, missing("urlRewrite")
		}
		return rewriteFilter(f.URLRewrite, field+".urlRewrite", env)
	case gwapiv1.HTTPRouteFilterExtensionRef:
		if f.ExtensionRef == nil {
			return nil, missing("extensionRef")
		}
		r := f.ExtensionRef
		return nil, &ruleFailure{field: field + ".extensionRef", reason: gwapiv1.RouteReasonInvalidKind, unresolved: true,
			msg: fmt.Sprintf("ExtensionRef %s %s cannot be resolved: no extension filters are supported yet", groupKind(string(r.Group), string(r.Kind)), r.Name)}
	case gwapiv1.HTTPRouteFilterRequestMirror, gwapiv1.HTTPRouteFilterCORS, gwapiv1.HTTPRouteFilterExternalAuth:
		return nil, fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "filter type %s is not supported yet", f.Type)
	}
	return nil, fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "unknown filter type %q", f.Type)
}

func headerFilter(id core.ModuleID, h *gwapiv1.HTTPHeaderFilter, field string) (*irv1.ModuleConfig, *ruleFailure) {
	var cfg headers.Config
	check := func(list, name string) *ruleFailure {
		if !headerName.MatchString(name) {
			return fail(field+"."+list, gwapiv1.RouteReasonUnsupportedValue, "invalid header name %q", name)
		}
		return nil
	}
	dup := map[string]map[string]bool{"set": {}, "add": {}, "remove": {}}
	seen := func(list, name string) bool {
		k := strings.ToLower(name)
		if dup[list][k] {
			return true
		}
		dup[list][k] = true
		return false
	}
	for _, x := range h.Set {
		if err := check("set", string(x.Name)); err != nil {
			return nil, err
		}
		if seen("set", string(x.Name)) {
			return nil, fail(field+".set", gwapiv1.RouteReasonUnsupportedValue, "header %q is set twice", x.Name)
		}
		cfg.Set = append(cfg.Set, headers.Header{Name: string(x.Name), Value: x.Value})
	}
	for _, x := range h.Add {
		if err := check("add", string(x.Name)); err != nil {
			return nil, err
		}
		if seen("add", string(x.Name)) {
			return nil, fail(field+".add", gwapiv1.RouteReasonUnsupportedValue, "header %q is added twice", x.Name)
		}
		cfg.Add = append(cfg.Add, headers.Header{Name: string(x.Name), Value: x.Value})
	}
	for _, name := range h.Remove {
		if err := check("remove", name); err != nil {
			return nil, err
		}
		if !seen("remove", name) {
			cfg.Remove = append(cfg.Remove, name)
		}
	}
	return core.MustConfig(id, cfg), nil
}

func redirectFilter(r *gwapiv1.HTTPRequestRedirectFilter, field string, env filterEnv) (*irv1.ModuleConfig, *ruleFailure) {
	cfg := redirect.Config{ListenerPort: env.listener.Port, ListenerScheme: "http"}
	if env.listener.Protocol == gwapiv1.HTTPSProtocolType {
		cfg.ListenerScheme = "https"
	}
	if r.Scheme != nil {
		if *r.Scheme != "http" && *r.Scheme != "https" {
			return nil, fail(field+".scheme", gwapiv1.RouteReasonUnsupportedValue, "unsupported scheme %q", *r.Scheme)
		}
		cfg.Scheme = *r.Scheme
	}
	if r.Hostname != nil {
		if errs := validation.IsDNS1123Subdomain(string(*r.Hostname)); len(errs) > 0 {
			return nil, fail(field+".hostname", gwapiv1.RouteReasonUnsupportedValue, "invalid hostname %q", *r.Hostname)
		}
		cfg.Hostname = string(*r.Hostname)
	}
	if r.Port != nil {
		if *r.Port < 1 || *r.Port > 65535 {
			return nil, fail(field+".port", gwapiv1.RouteReasonUnsupportedValue, "invalid port %d", *r.Port)
		}
		cfg.Port = uint32(*r.Port)
	}
	if r.StatusCode != nil {
		switch *r.StatusCode {
		case 301, 302, 303, 307, 308:
			cfg.StatusCode = *r.StatusCode
		default:
			return nil, fail(field+".statusCode", gwapiv1.RouteReasonUnsupportedValue, "unsupported status code %d", *r.StatusCode)
		}
	}
	if r.Path != nil {
		pm, err := pathModifier(r.Path, field+".path", env)
		if err != nil {
			return nil, err
		}
		cfg.Path = pm
	}
	return core.MustConfig(redirect.ModuleID, cfg), nil
}

func rewriteFilter(r *gwapiv1.HTTPURLRewriteFilter, field string, env filterEnv) (*irv1.ModuleConfig, *ruleFailure) {
	var cfg rewrite.Config
	if r.Hostname != nil {
		if errs := validation.IsDNS1123Subdomain(string(*r.Hostname)); len(errs) > 0 {
			return nil, fail(field+".hostname", gwapiv1.RouteReasonUnsupportedValue, "invalid hostname %q", *r.Hostname)
		}
		cfg.Hostname = string(*r.Hostname)
	}
	if r.Path != nil {
		pm, err := pathModifier(r.Path, field+".path", env)
		if err != nil {
			return nil, err
		}
		cfg.Path = pm
	}
	return core.MustConfig(rewrite.ModuleID, cfg), nil
}

func pathModifier(p *gwapiv1.HTTPPathModifier, field string, env filterEnv) (*pathmod.Modifier, *ruleFailure) {
	switch p.Type {
	case gwapiv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath == nil {
			return nil, fail(field+".replaceFullPath", gwapiv1.RouteReasonUnsupportedValue, "replaceFullPath must be set for type ReplaceFullPath")
		}
		return &pathmod.Modifier{Type: pathmod.ReplaceFullPath, ReplaceFullPath: *p.ReplaceFullPath}, nil
	case gwapiv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch == nil {
			return nil, fail(field+".replacePrefixMatch", gwapiv1.RouteReasonUnsupportedValue, "replacePrefixMatch must be set for type ReplacePrefixMatch")
		}
		if !env.prefixOK {
			return nil, fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "ReplacePrefixMatch requires the rule to have exactly one PathPrefix match")
		}
		return &pathmod.Modifier{Type: pathmod.ReplacePrefixMatch, ReplacePrefixMatch: *p.ReplacePrefixMatch, MatchedPrefix: env.prefix}, nil
	}
	return nil, fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "unknown path modifier type %q", p.Type)
}

func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}
