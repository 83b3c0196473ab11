package translate

import (
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/controller/features"
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/filters/redirect"
	"github.com/coxswain-labs/coxswain/modules/filters/rewrite"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

var _ features.Provider = Kind{}

// GatewayAPIFeatures lists the HTTPRoute features this translator implements, each with the
// proxy modules that serve it, so a distribution without (say) the redirect filter does not
// advertise redirects. Filters this translator rejects (RequestMirror, CORS) are not listed.
func (Kind) GatewayAPIFeatures() []features.Feature {
	route := core.ModuleID(httproute.ModuleID)
	with := func(ids ...core.ModuleID) []core.ModuleID { return append([]core.ModuleID{route}, ids...) }
	redirects := with(redirect.ModuleID)
	return []features.Feature{
		{Name: gwfeatures.SupportHTTPRoute, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteQueryParamMatching, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteNamedRouteRule, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteMethodMatching, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteParentRefPort, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteRequestTimeout, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteBackendTimeout, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteBackendProtocolH2C, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteBackendProtocolWebSocket, Requires: with()},
		{Name: gwfeatures.SupportHTTPRouteResponseHeaderModification, Requires: with(headers.ResponseModuleID)},
		{Name: gwfeatures.SupportHTTPRouteBackendRequestHeaderModification, Requires: with(headers.RequestModuleID)},
		{Name: gwfeatures.SupportHTTPRouteHostRewrite, Requires: with(rewrite.ModuleID)},
		{Name: gwfeatures.SupportHTTPRoutePathRewrite, Requires: with(rewrite.ModuleID)},
		{Name: gwfeatures.SupportHTTPRouteSchemeRedirect, Requires: redirects},
		{Name: gwfeatures.SupportHTTPRoutePortRedirect, Requires: redirects},
		{Name: gwfeatures.SupportHTTPRoutePathRedirect, Requires: redirects},
		{Name: gwfeatures.SupportHTTPRoute303RedirectStatusCode, Requires: redirects},
		{Name: gwfeatures.SupportHTTPRoute307RedirectStatusCode, Requires: redirects},
		{Name: gwfeatures.SupportHTTPRoute308RedirectStatusCode, Requires: redirects},
	}
}
