// Package translate is the controller half of filter.http.request_redirect: it registers
// "translate.filter.request_redirect", which turns a Gateway API RequestRedirect filter into
// redirect.Config, validated as the API server would, with the listener's port and scheme the
// proxy needs.
package translate

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	pathmodtr "github.com/coxswain-labs/coxswain/modules/filters/pathmod/translate"
	"github.com/coxswain-labs/coxswain/modules/filters/redirect"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func init() { core.RegisterModule(Translator{}) }

// Translator translates RequestRedirect filters.
type Translator struct{}

var (
	_ translation.FilterTranslator = Translator{}
	_ translation.FeatureProvider  = Translator{}
)

// CoxswainModule implements core.Module.
func (Translator) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.request_redirect", New: func() core.Module { return Translator{} }}
}

// FilterType implements translation.FilterTranslator.
func (Translator) FilterType() gwapiv1.HTTPRouteFilterType {
	return gwapiv1.HTTPRouteFilterRequestRedirect
}

// GatewayAPIFeatures implements translation.FeatureProvider.
func (Translator) GatewayAPIFeatures() []translation.Feature {
	req := []core.ModuleID{"route.http", redirect.ModuleID}
	var out []translation.Feature
	for _, f := range []gwfeatures.FeatureName{
		gwfeatures.SupportHTTPRouteSchemeRedirect, gwfeatures.SupportHTTPRoutePortRedirect,
		gwfeatures.SupportHTTPRoutePathRedirect, gwfeatures.SupportHTTPRoute303RedirectStatusCode,
		gwfeatures.SupportHTTPRoute307RedirectStatusCode, gwfeatures.SupportHTTPRoute308RedirectStatusCode,
	} {
		out = append(out, translation.Feature{Name: f, Requires: req})
	}
	return out
}

// TranslateFilter implements translation.FilterTranslator.
func (Translator) TranslateFilter(env translation.FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	r := f.RequestRedirect
	if r == nil {
		return nil, translation.Fail(field+".requestRedirect", gwapiv1.RouteReasonUnsupportedValue, "requestRedirect must be set for filter type %s", f.Type)
	}
	field += ".requestRedirect"
	bad := func(sub, format string, args ...any) (*irv1.ModuleConfig, *translation.Failure) {
		return nil, translation.Fail(field+"."+sub, gwapiv1.RouteReasonUnsupportedValue, format, args...)
	}
	cfg := redirect.Config{ListenerPort: env.Listener.Port, ListenerScheme: "http"}
	if env.Listener.Protocol == gwapiv1.HTTPSProtocolType {
		cfg.ListenerScheme = "https"
	}
	if r.Scheme != nil {
		if *r.Scheme != "http" && *r.Scheme != "https" {
			return bad("scheme", "unsupported scheme %q", *r.Scheme)
		}
		cfg.Scheme = *r.Scheme
	}
	if r.Hostname != nil {
		if !translation.ValidHostname(string(*r.Hostname)) {
			return bad("hostname", "invalid hostname %q", *r.Hostname)
		}
		cfg.Hostname = string(*r.Hostname)
	}
	if r.Port != nil {
		if *r.Port < 1 || *r.Port > 65535 {
			return bad("port", "invalid port %d", *r.Port)
		}
		cfg.Port = uint32(*r.Port)
	}
	if r.StatusCode != nil {
		switch *r.StatusCode {
		case 301, 302, 303, 307, 308:
			cfg.StatusCode = *r.StatusCode
		default:
			return bad("statusCode", "unsupported status code %d", *r.StatusCode)
		}
	}
	if r.Path != nil {
		pm, fail := pathmodtr.Modifier(r.Path, field+".path", env)
		if fail != nil {
			return nil, fail
		}
		cfg.Path = pm
	}
	return core.MustConfig(redirect.ModuleID, cfg), nil
}
