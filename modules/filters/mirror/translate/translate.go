// Package translate is the controller half of filter.http.request_mirror: it registers
// "translate.filter.request_mirror", which turns a Gateway API RequestMirror filter (of an
// HTTPRoute or a GRPCRoute) into mirror.Config: the backendRef resolved to a snapshot cluster
// (ReferenceGrants and ResolvedRefs exactly as for the rule's backendRefs), percent or fraction
// as one fraction, and the route object for the proxy's metric label.
package translate

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/mirror"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func init() { core.RegisterModule(Translator{}) }

// Translator translates RequestMirror filters.
type Translator struct{}

var (
	_ translation.FilterTranslator = Translator{}
	_ translation.FeatureProvider  = Translator{}
)

// CoxswainModule implements core.Module.
func (Translator) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.request_mirror", New: func() core.Module { return Translator{} }}
}

// FilterType implements translation.FilterTranslator.
func (Translator) FilterType() gwapiv1.HTTPRouteFilterType {
	return gwapiv1.HTTPRouteFilterRequestMirror
}

// GatewayAPIFeatures implements translation.FeatureProvider.
func (Translator) GatewayAPIFeatures() []translation.Feature {
	req := []core.ModuleID{"route.http", mirror.ModuleID}
	return []translation.Feature{
		{Name: gwfeatures.SupportHTTPRouteRequestMirror, Requires: req},
		{Name: gwfeatures.SupportHTTPRouteRequestMultipleMirrors, Requires: req},
		{Name: gwfeatures.SupportHTTPRouteRequestPercentageMirror, Requires: req},
	}
}

// TranslateFilter implements translation.FilterTranslator. A backendRef that does not resolve
// leaves the filter out (no config, no failure): the spec drops the mirror and keeps the rule,
// with ResolvedRefs=False, which env.Backends reports.
func (Translator) TranslateFilter(env translation.FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	m := f.RequestMirror
	field += ".requestMirror"
	if m == nil {
		return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "requestMirror must be set for filter type %s", f.Type)
	}
	cfg := mirror.Config{Route: env.Route}
	switch {
	case m.Percent != nil && m.Fraction != nil:
		return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "only one of percent or fraction may be specified")
	case m.Percent != nil:
		if *m.Percent < 0 || *m.Percent > 100 {
			return nil, translation.Fail(field+".percent", gwapiv1.RouteReasonUnsupportedValue, "percent %d is not between 0 and 100", *m.Percent)
		}
		cfg.Fraction = &mirror.Fraction{Numerator: uint32(*m.Percent), Denominator: 100}
	case m.Fraction != nil:
		den := int32(100)
		if m.Fraction.Denominator != nil {
			den = *m.Fraction.Denominator
		}
		if den < 1 || m.Fraction.Numerator < 0 || m.Fraction.Numerator > den {
			return nil, translation.Fail(field+".fraction", gwapiv1.RouteReasonUnsupportedValue,
				"fraction %d/%d: the denominator must be at least 1 and the numerator between 0 and it", m.Fraction.Numerator, den)
		}
		cfg.Fraction = &mirror.Fraction{Numerator: uint32(m.Fraction.Numerator), Denominator: uint32(den)}
	}
	if cfg.Fraction != nil && cfg.Fraction.Numerator == 0 {
		return nil, nil // mirrors nothing: no module to load
	}
	if env.Backends == nil {
		return nil, translation.Fail(field+".backendRef", gwapiv1.RouteReasonUnsupportedValue, "this translator cannot resolve the mirror's backendRef")
	}
	cluster, ok := env.Backends.Backend(field+".backendRef", m.BackendRef)
	if !ok {
		return nil, nil
	}
	cfg.Cluster = cluster
	return core.MustConfig(mirror.ModuleID, cfg), nil
}
