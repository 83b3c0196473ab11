// Package translate is the controller half of filter.http.url_rewrite: it registers
// "translate.filter.url_rewrite", which turns a Gateway API URLRewrite filter into
// rewrite.Config, validated as the API server would.
package translate

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	pathmodtr "github.com/coxswain-labs/coxswain/modules/filters/pathmod/translate"
	"github.com/coxswain-labs/coxswain/modules/filters/rewrite"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func init() { core.RegisterModule(Translator{}) }

// Translator translates URLRewrite filters.
type Translator struct{}

var (
	_ translation.FilterTranslator = Translator{}
	_ translation.FeatureProvider  = Translator{}
)

// CoxswainModule implements core.Module.
func (Translator) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.url_rewrite", New: func() core.Module { return Translator{} }}
}

// FilterType implements translation.FilterTranslator.
func (Translator) FilterType() gwapiv1.HTTPRouteFilterType { return gwapiv1.HTTPRouteFilterURLRewrite }

// GatewayAPIFeatures implements translation.FeatureProvider.
func (Translator) GatewayAPIFeatures() []translation.Feature {
	req := []core.ModuleID{"route.http", rewrite.ModuleID}
	return []translation.Feature{
		{Name: gwfeatures.SupportHTTPRouteHostRewrite, Requires: req},
		{Name: gwfeatures.SupportHTTPRoutePathRewrite, Requires: req},
		// A backendRef's URLRewrite is this filter in the Backend's chain, run after the rule's
		// filters on the backend it belongs to (provisional in v1.7.0).
		{Name: gwfeatures.SupportHTTPRouteBackendURLRewrite, Requires: req},
	}
}

// TranslateFilter implements translation.FilterTranslator.
func (Translator) TranslateFilter(env translation.FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	r := f.URLRewrite
	if r == nil {
		return nil, translation.Fail(field+".urlRewrite", gwapiv1.RouteReasonUnsupportedValue, "urlRewrite must be set for filter type %s", f.Type)
	}
	field += ".urlRewrite"
	var cfg rewrite.Config
	if r.Hostname != nil {
		if !translation.ValidHostname(string(*r.Hostname)) {
			return nil, translation.Fail(field+".hostname", gwapiv1.RouteReasonUnsupportedValue, "invalid hostname %q", *r.Hostname)
		}
		cfg.Hostname = string(*r.Hostname)
	}
	if r.Path != nil {
		pm, fail := pathmodtr.Modifier(r.Path, field+".path", env)
		if fail != nil {
			return nil, fail
		}
		cfg.Path = pm
	}
	return core.MustConfig(rewrite.ModuleID, cfg), nil
}
