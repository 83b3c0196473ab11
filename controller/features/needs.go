package features

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"
)

// Need is a part of the Gateway API that a feature needs the API server to serve: a resource,
// and optionally a field of its schema, a value the field's enum allows, or a validation rule
// that mentions a word. A cluster may run older CRDs than the ones the binary is built on (v1.6
// CRDs have no HTTPRoute retry), or the standard channel's, which lack the experimental fields: a
// feature whose fields are not served cannot be used, so it is not claimed.
type Need struct {
	// Resource is the kind as the controller reads it.
	Resource schema.GroupVersionResource
	// Path is a field of the resource's schema, dot-separated from the root; "[]" after a name
	// steps into the items of a list ("spec.rules[].retry"). Empty: the resource alone.
	Path string
	// Value, when set, must be one of the values the enum at Path allows (a field without an
	// enum allows any). A string or an integer.
	Value any
	// Rule, when set, must appear in one of the CEL validation rules (x-kubernetes-validations)
	// at Path: the experimental channel marks some references as allowed only that way.
	Rule string
}

// The resources features need, at the versions the controller reads them.
var (
	gateways           = gwv1("gateways")
	gatewayClasses     = gwv1("gatewayclasses")
	httpRoutes         = gwv1("httproutes")
	grpcRoutes         = gwv1("grpcroutes")
	tlsRoutes          = gwv1("tlsroutes")
	tcpRoutes          = gwv1("tcproutes")
	udpRoutes          = gwv1("udproutes")
	listenerSets       = gwv1("listenersets")
	backendTLSPolicies = gwv1("backendtlspolicies")
	referenceGrants    = schema.GroupVersionResource{Group: gwapiv1.GroupName, Version: "v1beta1", Resource: "referencegrants"}
)

func gwv1(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: gwapiv1.GroupName, Version: "v1", Resource: resource}
}

// field is a Need of one field of a resource.
func field(r schema.GroupVersionResource, path string) Need { return Need{Resource: r, Path: path} }

// kind is a Need of a resource alone.
func kind(r schema.GroupVersionResource) Need { return Need{Resource: r} }

// Needs maps every Gateway API feature (of Gateway API v1.7.0, mesh features aside) to what the
// API server must serve for it to be usable, derived from the v1.7.0 API types. A feature is
// claimed only when the registry serves it (Supported) and the cluster serves all of its needs
// (Filter). A feature of a newer Gateway API that is missing here is kept, and
// TestNeedsCoverEveryFeature fails until it is added.
var Needs = map[gwfeatures.FeatureName][]Need{
	// Gateways of a GatewayClass: the controller does not start without them.
	gwfeatures.SupportGateway: {kind(gateways), kind(gatewayClasses)},
	// A listener on port 8080: the port field has always been there.
	gwfeatures.SupportGatewayPort8080: {field(gateways, "spec.listeners[].port")},
	// spec.addresses with a value the proxy binds.
	gwfeatures.SupportGatewayStaticAddresses: {field(gateways, "spec.addresses[].value")},
	// spec.addresses entries without a value (the value became optional with the same field).
	gwfeatures.SupportGatewayAddressEmpty: {field(gateways, "spec.addresses[].type")},
	// Listeners that differ only by hostname.
	gwfeatures.SupportGatewayHTTPListenerIsolation: {field(gateways, "spec.listeners[].hostname")},
	// HTTPS listeners with certificates; a request for another listener's host gets 421.
	gwfeatures.SupportGatewayHTTPSListenerDetectMisdirectedRequests: {field(gateways, "spec.listeners[].tls.certificateRefs")},
	// spec.infrastructure labels and annotations, copied to what the Gateway provisions.
	gwfeatures.SupportGatewayInfrastructure: {field(gateways, "spec.infrastructure")},
	// ListenerSets attach listeners to Gateways that allow them in spec.allowedListeners.
	gwfeatures.SupportListenerSet: {kind(listenerSets), field(gateways, "spec.allowedListeners")},
	// spec.tls.backend.clientCertificateRef: the certificate the proxy presents to TLS backends.
	gwfeatures.SupportGatewayBackendClientCertificate: {field(gateways, "spec.tls.backend.clientCertificateRef")},
	// spec.tls.frontend: client certificates validated against CA bundles, for every port or per port.
	gwfeatures.SupportGatewayFrontendClientCertificateValidation: {
		field(gateways, "spec.tls.frontend.default.validation.caCertificateRefs"),
		field(gateways, "spec.tls.frontend.perPort[].tls.validation.caCertificateRefs"),
	},
	// The validation mode that lets clients without a valid certificate through.
	gwfeatures.SupportGatewayFrontendClientCertificateValidationInsecureFallback: {
		{Resource: gateways, Path: "spec.tls.frontend.default.validation.mode", Value: "AllowInsecureFallback"},
	},
	// spec.addresses[].routability (experimental, GEP-5093).
	gwfeatures.SupportGatewayAddressRoutability: {field(gateways, "spec.addresses[].routability")},
	// The Cluster routability of the same field.
	gwfeatures.SupportGatewayAddressRoutabilityCluster: {field(gateways, "spec.addresses[].routability")},
	// A behaviour of hostname intersection between listener and route hostnames: no field of its
	// own beyond the listener's hostname.
	gwfeatures.SupportGatewayRouteHostnameIntersectionPrecedence: {field(gateways, "spec.listeners[].hostname")},
	// spec.listeners[].filters: filters that run before routing (experimental, GEP-5224). On a
	// ListenerSet's listeners too when ListenerSet is served, but a Gateway's listeners are what the
	// feature needs.
	gwfeatures.SupportGatewayListenerFilters: {field(gateways, "spec.listeners[].filters.requests")},
	// ClusterTrustBundle as a CA source (experimental, GEP-5075): the experimental Gateway schema
	// allows it in caCertificateRefs through a validation rule that names it.
	gwfeatures.SupportClusterTrustBundle: {
		{Resource: gateways, Path: "spec.tls.frontend.default.validation.caCertificateRefs", Rule: "ClusterTrustBundle"},
	},

	// HTTPRoute and the features of its core matches and filters.
	gwfeatures.SupportHTTPRoute: {kind(httpRoutes)},
	// A parentRef port that must match a listener's port (experimental channel, standard field).
	gwfeatures.SupportHTTPRouteDestinationPortMatching: {field(httpRoutes, "spec.parentRefs[].port")},
	// RequestHeaderModifier on a backendRef.
	gwfeatures.SupportHTTPRouteBackendRequestHeaderModification: {field(httpRoutes, "spec.rules[].backendRefs[].filters[].requestHeaderModifier")},
	gwfeatures.SupportHTTPRouteQueryParamMatching:               {field(httpRoutes, "spec.rules[].matches[].queryParams")},
	gwfeatures.SupportHTTPRouteMethodMatching:                   {field(httpRoutes, "spec.rules[].matches[].method")},
	gwfeatures.SupportHTTPRouteResponseHeaderModification:       {field(httpRoutes, "spec.rules[].filters[].responseHeaderModifier")},
	gwfeatures.SupportHTTPRoutePortRedirect:                     {field(httpRoutes, "spec.rules[].filters[].requestRedirect.port")},
	gwfeatures.SupportHTTPRouteSchemeRedirect:                   {field(httpRoutes, "spec.rules[].filters[].requestRedirect.scheme")},
	gwfeatures.SupportHTTPRoutePathRedirect:                     {field(httpRoutes, "spec.rules[].filters[].requestRedirect.path")},
	gwfeatures.SupportHTTPRouteHostRewrite:                      {field(httpRoutes, "spec.rules[].filters[].urlRewrite.hostname")},
	gwfeatures.SupportHTTPRoutePathRewrite:                      {field(httpRoutes, "spec.rules[].filters[].urlRewrite.path")},
	// RequestMirror, one or several per rule.
	gwfeatures.SupportHTTPRouteRequestMirror:          {field(httpRoutes, "spec.rules[].filters[].requestMirror.backendRef")},
	gwfeatures.SupportHTTPRouteRequestMultipleMirrors: {field(httpRoutes, "spec.rules[].filters[].requestMirror.backendRef")},
	// Sampled mirroring: requestMirror.percent and requestMirror.fraction.
	gwfeatures.SupportHTTPRouteRequestPercentageMirror: {
		field(httpRoutes, "spec.rules[].filters[].requestMirror.percent"),
		field(httpRoutes, "spec.rules[].filters[].requestMirror.fraction"),
	},
	gwfeatures.SupportHTTPRouteRequestTimeout: {field(httpRoutes, "spec.rules[].timeouts.request")},
	gwfeatures.SupportHTTPRouteBackendTimeout: {field(httpRoutes, "spec.rules[].timeouts.backendRequest")},
	gwfeatures.SupportHTTPRouteParentRefPort:  {field(httpRoutes, "spec.parentRefs[].port")},
	// The backend protocol comes from the Service's appProtocol: nothing of HTTPRoute's own.
	gwfeatures.SupportHTTPRouteBackendProtocolH2C:       {kind(httpRoutes)},
	gwfeatures.SupportHTTPRouteBackendProtocolWebSocket: {kind(httpRoutes)},
	gwfeatures.SupportHTTPRouteNamedRouteRule:           {field(httpRoutes, "spec.rules[].name")},
	// The CORS filter (GEP-1767): its type and its field.
	gwfeatures.SupportHTTPRouteCORS: {
		{Resource: httpRoutes, Path: "spec.rules[].filters[].type", Value: "CORS"},
		field(httpRoutes, "spec.rules[].filters[].cors"),
	},
	// Redirect status codes beyond 301 and 302, as the statusCode enum allows them.
	gwfeatures.SupportHTTPRoute303RedirectStatusCode: {{Resource: httpRoutes, Path: "spec.rules[].filters[].requestRedirect.statusCode", Value: 303}},
	gwfeatures.SupportHTTPRoute307RedirectStatusCode: {{Resource: httpRoutes, Path: "spec.rules[].filters[].requestRedirect.statusCode", Value: 307}},
	gwfeatures.SupportHTTPRoute308RedirectStatusCode: {{Resource: httpRoutes, Path: "spec.rules[].filters[].requestRedirect.statusCode", Value: 308}},
	// spec.rules[].retry (GEP-1731, standard since v1.7.0; absent from v1.6 CRDs): codes, and
	// attempts that also retry connection errors.
	gwfeatures.SupportHTTPRouteRetryCodes:           {field(httpRoutes, "spec.rules[].retry.codes")},
	gwfeatures.SupportHTTPRouteRetryConnectionError: {field(httpRoutes, "spec.rules[].retry.attempts")},
	// URLRewrite on a backendRef.
	gwfeatures.SupportHTTPRouteBackendURLRewrite: {field(httpRoutes, "spec.rules[].backendRefs[].filters[].urlRewrite")},

	gwfeatures.SupportGRPCRoute:                      {kind(grpcRoutes)},
	gwfeatures.SupportGRPCRouteNamedRouteRule:        {field(grpcRoutes, "spec.rules[].name")},
	gwfeatures.SupportGRPCRouteRequestHeaderModifier: {field(grpcRoutes, "spec.rules[].filters[].requestHeaderModifier")},

	// BackendTLSPolicy: TLS to backends verified against hostname, and against subjectAltNames.
	gwfeatures.SupportBackendTLSPolicy:              {field(backendTLSPolicies, "spec.validation.hostname")},
	gwfeatures.SupportBackendTLSPolicySANValidation: {field(backendTLSPolicies, "spec.validation.subjectAltNames")},

	gwfeatures.SupportTLSRoute: {kind(tlsRoutes)},
	// A TLS listener that terminates TLS for TLSRoutes.
	gwfeatures.SupportTLSRouteModeTerminate: {kind(tlsRoutes), {Resource: gateways, Path: "spec.listeners[].tls.mode", Value: "Terminate"}},
	// Passthrough and Terminate TLS listeners on one port.
	gwfeatures.SupportTLSRouteModeMixed: {kind(tlsRoutes), {Resource: gateways, Path: "spec.listeners[].tls.mode", Value: "Passthrough"}},
	gwfeatures.SupportTCPRoute:          {kind(tcpRoutes)},
	gwfeatures.SupportUDPRoute:          {kind(udpRoutes)},
	gwfeatures.SupportReferenceGrant:    {kind(referenceGrants)},
}
