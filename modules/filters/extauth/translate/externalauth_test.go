package translate

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// TestExternalAuthRefusals: what the module cannot do as the filter asks is refused with the
// field, never served differently (these fail before any reference is resolved).
func TestExternalAuthRefusals(t *testing.T) {
	base := func(mod func(*gwapiv1.HTTPExternalAuthFilter)) gwapiv1.HTTPRouteFilter {
		ea := &gwapiv1.HTTPExternalAuthFilter{ExternalAuthProtocol: gwapiv1.HTTPRouteExternalAuthHTTPProtocol,
			BackendRef: gwapiv1.BackendObjectReference{Name: "auth", Port: ptr.To(gwapiv1.PortNumber(80))}}
		mod(ea)
		return gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterExternalAuth, ExternalAuth: ea}
	}
	cases := []struct {
		name, field string
		mod         func(*gwapiv1.HTTPExternalAuthFilter)
	}{
		{"path prefix", "http.path", func(e *gwapiv1.HTTPExternalAuthFilter) { e.HTTPAuthConfig = &gwapiv1.HTTPAuthConfig{Path: "/check"} }},
		{"request header list", "http.allowedHeaders", func(e *gwapiv1.HTTPExternalAuthFilter) {
			e.HTTPAuthConfig = &gwapiv1.HTTPAuthConfig{AllowedRequestHeaders: []string{"Authorization"}}
		}},
		{"gRPC request header list", "grpc.allowedHeaders", func(e *gwapiv1.HTTPExternalAuthFilter) {
			e.ExternalAuthProtocol = gwapiv1.HTTPRouteExternalAuthGRPCProtocol
			e.GRPCAuthConfig = &gwapiv1.GRPCAuthConfig{AllowedRequestHeaders: []string{"Authorization"}}
		}},
		{"body", "forwardBody", func(e *gwapiv1.HTTPExternalAuthFilter) { e.ForwardBody = &gwapiv1.ForwardBodyConfig{MaxSize: 1024} }},
		{"protocol", "protocol", func(e *gwapiv1.HTTPExternalAuthFilter) { e.ExternalAuthProtocol = "SOAP" }},
		{"kind", "backendRef", func(e *gwapiv1.HTTPExternalAuthFilter) { e.BackendRef.Kind = ptr.To(gwapiv1.Kind("Pod")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rc translation.ResolveContext // not reached
			_, f := Filter{}.TranslateResolved(rc, translation.FilterEnv{}, base(c.mod), "spec.listeners[0].filters.requests[0]")
			if f == nil || f.Field != "spec.listeners[0].filters.requests[0].externalAuth."+c.field {
				t.Fatalf("failure %+v, want one at .externalAuth.%s", f, c.field)
			}
			if c.field != "backendRef" && (f.Reason != gwapiv1.RouteReasonUnsupportedValue || !strings.Contains(f.Message, "not supported") && c.field != "protocol") {
				t.Errorf("failure %+v", f)
			}
		})
	}
}
