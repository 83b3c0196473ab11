package translate

import (
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/httproute"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

var _ translation.FeatureProvider = Kind{}

// GatewayAPIFeatures lists the HTTPRoute features of the route kind itself: matches, timeouts,
// retries, backend protocols. Each filter's features are claimed by its own translator (e.g.
// modules/filters/redirect/translate), so a distribution without a filter does not advertise it.
func (Kind) GatewayAPIFeatures() []translation.Feature {
	req := []core.ModuleID{httproute.ModuleID}
	var out []translation.Feature
	for _, f := range []gwfeatures.FeatureName{
		gwfeatures.SupportHTTPRoute,
		gwfeatures.SupportHTTPRouteQueryParamMatching,
		gwfeatures.SupportHTTPRouteNamedRouteRule,
		gwfeatures.SupportHTTPRouteMethodMatching,
		gwfeatures.SupportHTTPRouteParentRefPort,
		gwfeatures.SupportHTTPRouteRequestTimeout,
		gwfeatures.SupportHTTPRouteBackendTimeout,
		gwfeatures.SupportHTTPRouteRetryCodes,
		gwfeatures.SupportHTTPRouteRetryConnectionError,
		gwfeatures.SupportHTTPRouteDestinationPortMatching,
		gwfeatures.SupportHTTPRouteBackendProtocolH2C,
		gwfeatures.SupportHTTPRouteBackendProtocolWebSocket,
		// BackendTLSPolicy and the Gateway's backend client certificate are translated by the
		// core (controller/translator/backendtls.go) and served by the proxy's forwarders; the
		// HTTP route kind claims them as the first kind whose backends they make TLS.
		gwfeatures.SupportBackendTLSPolicy,
		gwfeatures.SupportBackendTLSPolicySANValidation,
		gwfeatures.SupportGatewayBackendClientCertificate,
	} {
		out = append(out, translation.Feature{Name: f, Requires: req})
	}
	return out
}
