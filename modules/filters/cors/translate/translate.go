// Package translate is the controller half of filter.http.cors: it registers
// "translate.filter.cors", which turns a Gateway API CORS filter into cors.Config, validated as
// the API server would (patterns, list sizes, the wildcard rules), and claims HTTPRouteCORS.
package translate

import (
	"regexp"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/cors"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func init() { core.RegisterModule(Translator{}) }

// Translator translates CORS filters.
type Translator struct{}

var (
	_ translation.FilterTranslator = Translator{}
	_ translation.FeatureProvider  = Translator{}
)

// CoxswainModule implements core.Module.
func (Translator) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.cors", New: func() core.Module { return Translator{} }}
}

// FilterType implements translation.FilterTranslator.
func (Translator) FilterType() gwapiv1.HTTPRouteFilterType { return gwapiv1.HTTPRouteFilterCORS }

// GatewayAPIFeatures implements translation.FeatureProvider.
func (Translator) GatewayAPIFeatures() []translation.Feature {
	return []translation.Feature{{Name: gwfeatures.SupportHTTPRouteCORS, Requires: []core.ModuleID{"route.http", cors.ModuleID}}}
}

// originRE is the CORSOrigin pattern of the CRD.
var originRE = regexp.MustCompile(`(^\*$)|(^(http(s)?):\/\/(((\*\.)?([a-zA-Z0-9\-]+\.)*[a-zA-Z0-9-]+|\*)(:([0-9]{1,5}))?)$)`)

// methods are the HTTPMethodWithWildcard enum.
var methods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "DELETE": true,
	"CONNECT": true, "OPTIONS": true, "TRACE": true, "PATCH": true, "*": true}

// TranslateFilter implements translation.FilterTranslator.
func (Translator) TranslateFilter(_ translation.FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	c := f.CORS
	field += ".cors"
	if c == nil {
		return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "cors must be set for filter type %s", f.Type)
	}
	bad := func(sub, format string, args ...any) (*irv1.ModuleConfig, *translation.Failure) {
		at := field
		if sub != "" {
			at += "." + sub
		}
		return nil, translation.Fail(at, gwapiv1.RouteReasonUnsupportedValue, format, args...)
	}
	cfg := cors.Config{MaxAge: c.MaxAge, AllowCredentials: c.AllowCredentials != nil && *c.AllowCredentials}
	if c.MaxAge < 0 {
		return bad("maxAge", "maxAge %d must be at least 1", c.MaxAge)
	}
	if len(c.AllowOrigins) > 64 || len(c.AllowHeaders) > 64 || len(c.ExposeHeaders) > 64 || len(c.AllowMethods) > 9 {
		return bad("", "too many entries (at most 64 origins and headers, 9 methods)")
	}
	for _, o := range c.AllowOrigins {
		if !originRE.MatchString(string(o)) {
			return bad("allowOrigins", "%q is not an origin (<scheme>://<host>[:<port>], or \"*\")", o)
		}
		cfg.AllowOrigins = appendSet(cfg.AllowOrigins, string(o), false)
	}
	for _, m := range c.AllowMethods {
		if !methods[string(m)] {
			return bad("allowMethods", "%q is not a method", m)
		}
		cfg.AllowMethods = appendSet(cfg.AllowMethods, string(m), false)
	}
	for _, h := range c.AllowHeaders {
		if h != "*" && !translation.ValidHeaderName(string(h)) {
			return bad("allowHeaders", "invalid header name %q", h)
		}
		cfg.AllowHeaders = appendSet(cfg.AllowHeaders, string(h), true)
	}
	for _, h := range c.ExposeHeaders {
		if h != "*" && !translation.ValidHeaderName(string(h)) {
			return bad("exposeHeaders", "invalid header name %q", h)
		}
		cfg.ExposeHeaders = appendSet(cfg.ExposeHeaders, string(h), true)
	}
	mod := &cors.CORS{Config: cfg}
	if err := mod.CheckConfig(); err != nil { // the wildcard rules of the CRD's CEL
		return bad("", "%v", err)
	}
	return core.MustConfig(cors.ModuleID, cfg), nil
}

// appendSet appends v unless it is there (the lists are sets), case-insensitively for header names.
func appendSet(set []string, v string, fold bool) []string {
	for _, s := range set {
		if s == v || (fold && strings.EqualFold(s, v)) {
			return set
		}
	}
	return append(set, v)
}
