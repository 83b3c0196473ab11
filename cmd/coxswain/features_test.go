package main

import (
	"slices"
	"testing"

	"github.com/coxswain-labs/coxswain/controller/features"
	"github.com/coxswain-labs/coxswain/core"
)

// TestStockFeatures: the stock binary claims exactly these Gateway API features (what the
// conformance report lists). Every feature is claimed by the module that implements it, so a
// module dropped from the stock list, or a translator whose claim is lost, shows here first.
func TestStockFeatures(t *testing.T) {
	want := []string{
		"BackendTLSPolicy",
		"BackendTLSPolicySANValidation",
		"ClusterTrustBundle",
		"GRPCRoute",
		"GRPCRouteNamedRouteRule",
		"GRPCRouteRequestHeaderModifier",
		"Gateway",
		"GatewayAddressEmpty",
		"GatewayAddressRoutability",
		"GatewayBackendClientCertificate",
		"GatewayFrontendClientCertificateValidation",
		"GatewayFrontendClientCertificateValidationInsecureFallback",
		"GatewayHTTPListenerIsolation",
		"GatewayHTTPSListenerDetectMisdirectedRequests",
		"GatewayListenerFilters",
		"GatewayPort8080",
		"GatewayRouteHostnameIntersectionPrecedence",
		"GatewayStaticAddresses",
		"HTTPRoute",
		"HTTPRoute303RedirectStatusCode",
		"HTTPRoute307RedirectStatusCode",
		"HTTPRoute308RedirectStatusCode",
		"HTTPRouteBackendProtocolH2C",
		"HTTPRouteBackendProtocolWebSocket",
		"HTTPRouteBackendRequestHeaderModification",
		"HTTPRouteBackendTimeout",
		"HTTPRouteBackendURLRewrite",
		"HTTPRouteCORS",
		"HTTPRouteDestinationPortMatching",
		"HTTPRouteHostRewrite",
		"HTTPRouteMethodMatching",
		"HTTPRouteNamedRouteRule",
		"HTTPRouteParentRefPort",
		"HTTPRoutePathRedirect",
		"HTTPRoutePathRewrite",
		"HTTPRoutePortRedirect",
		"HTTPRouteQueryParamMatching",
		"HTTPRouteRequestMirror",
		"HTTPRouteRequestMultipleMirrors",
		"HTTPRouteRequestPercentageMirror",
		"HTTPRouteRequestTimeout",
		"HTTPRouteResponseHeaderModification",
		"HTTPRouteRetryCodes",
		"HTTPRouteRetryConnectionError",
		"HTTPRouteSchemeRedirect",
		"ListenerSet",
		"ReferenceGrant",
		"TCPRoute",
		"TLSRoute",
		"TLSRouteModeMixed",
		"TLSRouteModeTerminate",
		"UDPRoute",
	}
	var got []string
	for _, f := range features.Supported(core.Freeze()) {
		got = append(got, string(f.Name))
	}
	if !slices.Equal(got, want) {
		t.Errorf("supported features\n got %v\nwant %v", got, want)
	}
}
