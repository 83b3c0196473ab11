// Package translate is the controller half of the header modifier filters: it registers
// "translate.filter.request_header_modifier" and "translate.filter.response_header_modifier",
// which turn Gateway API HTTPHeaderFilters (of HTTPRoutes and GRPCRoutes alike) into
// headers.Config, validated as the API server would.
package translate

import (
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func init() {
	core.RegisterModule(Request{})
	core.RegisterModule(Response{})
}

// Request translates RequestHeaderModifier filters.
type Request struct{}

// Response translates ResponseHeaderModifier filters.
type Response struct{}

var (
	_ translation.FilterTranslator = Request{}
	_ translation.FilterTranslator = Response{}
	_ translation.FeatureProvider  = Request{}
	_ translation.FeatureProvider  = Response{}
)

// CoxswainModule implements core.Module.
func (Request) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.request_header_modifier", New: func() core.Module { return Request{} }}
}

// CoxswainModule implements core.Module.
func (Response) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.response_header_modifier", New: func() core.Module { return Response{} }}
}

// FilterType implements translation.FilterTranslator.
func (Request) FilterType() gwapiv1.HTTPRouteFilterType {
	return gwapiv1.HTTPRouteFilterRequestHeaderModifier
}

// FilterType implements translation.FilterTranslator.
func (Response) FilterType() gwapiv1.HTTPRouteFilterType {
	return gwapiv1.HTTPRouteFilterResponseHeaderModifier
}

// TranslateFilter implements translation.FilterTranslator.
func (Request) TranslateFilter(_ translation.FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	if f.RequestHeaderModifier == nil {
		return nil, translation.Fail(field+".requestHeaderModifier", gwapiv1.RouteReasonUnsupportedValue, "requestHeaderModifier must be set for filter type %s", f.Type)
	}
	return config(headers.RequestModuleID, f.RequestHeaderModifier, field+".requestHeaderModifier")
}

// TranslateFilter implements translation.FilterTranslator.
func (Response) TranslateFilter(_ translation.FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	if f.ResponseHeaderModifier == nil {
		return nil, translation.Fail(field+".responseHeaderModifier", gwapiv1.RouteReasonUnsupportedValue, "responseHeaderModifier must be set for filter type %s", f.Type)
	}
	return config(headers.ResponseModuleID, f.ResponseHeaderModifier, field+".responseHeaderModifier")
}

// GatewayAPIFeatures implements translation.FeatureProvider: a backendRef's request header
// modifier is this filter too, and so is a GRPCRoute's (gRPC metadata is HTTP/2 headers; the
// modifier's canonical names reach the backend lowercased, as HTTP/2 requires).
func (Request) GatewayAPIFeatures() []translation.Feature {
	return []translation.Feature{
		{Name: gwfeatures.SupportHTTPRouteBackendRequestHeaderModification,
			Requires: []core.ModuleID{"route.http", headers.RequestModuleID}},
		{Name: gwfeatures.SupportGRPCRouteRequestHeaderModifier,
			Requires: []core.ModuleID{"route.grpc", headers.RequestModuleID}},
	}
}

// GatewayAPIFeatures implements translation.FeatureProvider.
func (Response) GatewayAPIFeatures() []translation.Feature {
	return []translation.Feature{{Name: gwfeatures.SupportHTTPRouteResponseHeaderModification,
		Requires: []core.ModuleID{"route.http", headers.ResponseModuleID}}}
}

// config validates an HTTPHeaderFilter as the API would (header names; each name at most once
// in set and in add; a name removed twice counts once) and builds the modifier's config.
func config(id core.ModuleID, h *gwapiv1.HTTPHeaderFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	var cfg headers.Config
	seen := map[string]map[string]bool{"set": {}, "add": {}, "remove": {}}
	check := func(list, name, verb string) (dup bool, f *translation.Failure) {
		if !translation.ValidHeaderName(name) {
			return false, translation.Fail(field+"."+list, gwapiv1.RouteReasonUnsupportedValue, "invalid header name %q", name)
		}
		k := strings.ToLower(name)
		dup = seen[list][k]
		seen[list][k] = true
		if dup && verb != "" {
			return dup, translation.Fail(field+"."+list, gwapiv1.RouteReasonUnsupportedValue, "header %q is %s twice", name, verb)
		}
		return dup, nil
	}
	for _, x := range h.Set {
		if _, f := check("set", string(x.Name), "set"); f != nil {
			return nil, f
		}
		cfg.Set = append(cfg.Set, headers.Header{Name: string(x.Name), Value: x.Value})
	}
	for _, x := range h.Add {
		if _, f := check("add", string(x.Name), "added"); f != nil {
			return nil, f
		}
		cfg.Add = append(cfg.Add, headers.Header{Name: string(x.Name), Value: x.Value})
	}
	for _, name := range h.Remove {
		dup, f := check("remove", name, "")
		if f != nil {
			return nil, f
		}
		if !dup {
			cfg.Remove = append(cfg.Remove, name)
		}
	}
	return core.MustConfig(id, cfg), nil
}
