package features

import (
	"reflect"
	"testing"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// plain is a module that declares no features.
type plain struct{ id core.ModuleID }

func (m plain) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: m.id, New: func() core.Module { return m }}
}

// provider is a controller-side module that declares features.
type provider struct {
	id    core.ModuleID
	feats []translation.Feature
}

func (m provider) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: m.id, New: func() core.Module { return m }}
}

func (m provider) GatewayAPIFeatures() []translation.Feature { return m.feats }

var _ translation.FeatureProvider = provider{}

func names(fs []gwapiv1.SupportedFeature) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, string(f.Name))
	}
	return out
}

func TestSupported(t *testing.T) {
	httpKind := provider{id: "translate.route.http", feats: []translation.Feature{
		{Name: gwfeatures.SupportHTTPRoute, Requires: []core.ModuleID{"route.http"}},
		{Name: gwfeatures.SupportHTTPRouteResponseHeaderModification, Requires: []core.ModuleID{"route.http", "filter.http.response_header_modifier"}},
		{Name: gwfeatures.SupportHTTPRoute, Requires: []core.ModuleID{"route.http"}}, // declared twice: listed once
	}}
	listeners := []core.Module{plain{"listener.http"}, plain{"listener.https"}}
	tests := []struct {
		name string
		mods []core.Module
		want []string
	}{
		{name: "empty registry serves nothing", want: []string{}},
		{name: "listeners only: core features", mods: listeners,
			want: []string{"ClusterTrustBundle", "Gateway", "GatewayAddressEmpty", "GatewayAddressRoutability", "GatewayFrontendClientCertificateValidation", "GatewayFrontendClientCertificateValidationInsecureFallback", "GatewayHTTPListenerIsolation", "GatewayHTTPSListenerDetectMisdirectedRequests", "GatewayListenerFilters", "GatewayPort8080", "GatewayRouteHostnameIntersectionPrecedence", "GatewayStaticAddresses", "ListenerSet", "ReferenceGrant"}},
		{name: "no https listener: no Gateway", mods: []core.Module{plain{"listener.http"}},
			want: []string{"GatewayAddressEmpty", "GatewayAddressRoutability", "GatewayHTTPListenerIsolation", "GatewayListenerFilters", "GatewayPort8080", "GatewayRouteHostnameIntersectionPrecedence", "GatewayStaticAddresses", "ListenerSet", "ReferenceGrant"}},
		{name: "route kind without its proxy module", mods: append([]core.Module{httpKind}, listeners...),
			want: []string{"ClusterTrustBundle", "Gateway", "GatewayAddressEmpty", "GatewayAddressRoutability", "GatewayFrontendClientCertificateValidation", "GatewayFrontendClientCertificateValidationInsecureFallback", "GatewayHTTPListenerIsolation", "GatewayHTTPSListenerDetectMisdirectedRequests", "GatewayListenerFilters", "GatewayPort8080", "GatewayRouteHostnameIntersectionPrecedence", "GatewayStaticAddresses", "ListenerSet", "ReferenceGrant"}},
		{name: "route kind without the filter", mods: append([]core.Module{httpKind, plain{"route.http"}}, listeners...),
			want: []string{"ClusterTrustBundle", "Gateway", "GatewayAddressEmpty", "GatewayAddressRoutability", "GatewayFrontendClientCertificateValidation", "GatewayFrontendClientCertificateValidationInsecureFallback", "GatewayHTTPListenerIsolation", "GatewayHTTPSListenerDetectMisdirectedRequests", "GatewayListenerFilters", "GatewayPort8080", "GatewayRouteHostnameIntersectionPrecedence", "GatewayStaticAddresses", "HTTPRoute", "ListenerSet", "ReferenceGrant"}},
		{name: "everything", mods: append([]core.Module{httpKind, plain{"route.http"}, plain{"filter.http.response_header_modifier"}}, listeners...),
			want: []string{"ClusterTrustBundle", "Gateway", "GatewayAddressEmpty", "GatewayAddressRoutability", "GatewayFrontendClientCertificateValidation", "GatewayFrontendClientCertificateValidationInsecureFallback", "GatewayHTTPListenerIsolation", "GatewayHTTPSListenerDetectMisdirectedRequests", "GatewayListenerFilters", "GatewayPort8080", "GatewayRouteHostnameIntersectionPrecedence", "GatewayStaticAddresses", "HTTPRoute", "HTTPRouteResponseHeaderModification", "ListenerSet", "ReferenceGrant"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := names(Supported(core.NewRegistry(tc.mods...)))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Supported() = %v, want %v", got, tc.want)
			}
		})
	}
}

// Every name a module may declare must be a feature the pinned Gateway API version knows.
func TestCoreNamesAreKnown(t *testing.T) {
	for _, f := range Core {
		if gwfeatures.GetFeature(f.Name).Name == "" {
			t.Errorf("unknown feature %q", f.Name)
		}
	}
}
