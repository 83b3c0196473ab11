package translate

import (
	"encoding/json"
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/extauth"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// FilterModuleID is the translator of Gateway API's ExternalAuth filter type (HTTPExternalAuthFilter,
// GEP-1494), the inline form of a CoxswainExternalAuth: it makes the same module's config, with
// its backendRef resolved from the object holding the filter (a route, or the Gateway of a
// listener filter).
const FilterModuleID = "translate.filter.external_auth"

func init() { core.RegisterModule(Filter{}) }

// Filter is the module.
type Filter struct{}

var _ translation.ResolvingFilterTranslator = Filter{}

// CoxswainModule implements core.Module.
func (Filter) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: FilterModuleID, New: func() core.Module { return Filter{} }}
}

// FilterType implements translation.FilterTranslator.
func (Filter) FilterType() gwapiv1.HTTPRouteFilterType { return gwapiv1.HTTPRouteFilterExternalAuth }

// TranslateFilter implements translation.FilterTranslator; the core calls TranslateResolved.
func (Filter) TranslateFilter(_ translation.FilterEnv, _ gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "the ExternalAuth filter needs its backendRef resolved")
}

// TranslateResolved implements translation.ResolvingFilterTranslator. What the module cannot do
// as written is refused rather than served differently: a path prefix, a list of request headers
// to send (every header is sent), a forwarded body.
func (Filter) TranslateResolved(rc translation.ResolveContext, _ translation.FilterEnv, f gwapiv1.HTTPRouteFilter, field string) (*irv1.ModuleConfig, *translation.Failure) {
	ea := f.ExternalAuth
	field += ".externalAuth"
	if ea == nil {
		return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "externalAuth must be set for filter type ExternalAuth")
	}
	unsupported := func(sub, what string) *translation.Failure {
		return translation.Fail(field+"."+sub, gwapiv1.RouteReasonUnsupportedValue, "%s is not supported", what)
	}
	spec := extauth.Spec{BackendRef: extauth.BackendRef{Name: string(ea.BackendRef.Name)}}
	switch ea.ExternalAuthProtocol {
	case gwapiv1.HTTPRouteExternalAuthHTTPProtocol:
		spec.Protocol = extauth.ProtocolHTTP
		if h := ea.HTTPAuthConfig; h != nil {
			if h.Path != "" && h.Path != "/" {
				return nil, unsupported("http.path", "a path prefix for the authorization request")
			}
			if len(h.AllowedRequestHeaders) > 0 {
				return nil, unsupported("http.allowedHeaders", "limiting the headers sent to the authorization service (all are sent)")
			}
			spec.AllowedResponseHeaders = h.AllowedResponseHeaders
		}
	case gwapiv1.HTTPRouteExternalAuthGRPCProtocol:
		spec.Protocol = extauth.ProtocolGRPC
		if g := ea.GRPCAuthConfig; g != nil && len(g.AllowedRequestHeaders) > 0 {
			return nil, unsupported("grpc.allowedHeaders", "limiting the headers sent to the authorization service (all are sent)")
		}
	default:
		return nil, translation.Fail(field+".protocol", gwapiv1.RouteReasonUnsupportedValue, "protocol %q: HTTP or GRPC", ea.ExternalAuthProtocol)
	}
	if ea.ForwardBody != nil && ea.ForwardBody.MaxSize > 0 {
		return nil, unsupported("forwardBody", "forwarding the request body")
	}
	if ea.BackendRef.Port != nil {
		spec.BackendRef.Port = int32(*ea.BackendRef.Port)
	}
	if ea.BackendRef.Namespace != nil {
		spec.BackendRef.Namespace = string(*ea.BackendRef.Namespace)
	}
	if g, k := ptrOr(ea.BackendRef.Group, ""), ptrOr(ea.BackendRef.Kind, "Service"); g != "" || k != "Service" {
		return nil, &translation.Failure{Field: field + ".backendRef", Reason: gwapiv1.RouteReasonInvalidKind, Unresolved: true,
			Message: fmt.Sprintf("backendRef %s.%s: only Services can be called", k, g)}
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "%v", err)
	}
	out, err := Resolve(rc, rc.Namespace()+"/"+field, raw)
	if err != nil {
		return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "%v", err)
	}
	mc := &irv1.ModuleConfig{Id: extauth.ModuleID, Json: out}
	var check extauth.ExternalAuth
	err = core.DecodeStrict(out, &check)
	if err == nil {
		err = check.CheckConfig()
	}
	if err != nil {
		return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "%v", err)
	}
	return mc, nil
}

func ptrOr[T ~string](p *T, def string) string {
	if p == nil {
		return def
	}
	return string(*p)
}
