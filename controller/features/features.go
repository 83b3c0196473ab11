// Package features derives the Gateway API features a Coxswain binary can serve from the modules
// compiled into it. A GatewayClass advertises exactly this set in status.supportedFeatures, so a
// custom distribution that leaves a filter out never claims the feature that filter serves.
//
// Nobody keeps a list of supported features. Controller-side modules (translate.*) implement
// translation.FeatureProvider: they name each feature they translate together with the modules a proxy needs to
// serve it, and Supported keeps a feature only when every one of those modules is in the registry.
package features

import (
	"sort"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Core are the features the translator's core passes implement for every route kind: Gateways and
// their listeners, and ReferenceGrant checks. Gateway support includes HTTPS listeners (TLS
// termination is core in the spec), so it needs both HTTP listener modules.
var Core = []translation.Feature{
	{Name: gwfeatures.SupportGateway, Requires: []core.ModuleID{"listener.http", "listener.https"}},
	{Name: gwfeatures.SupportGatewayPort8080, Requires: []core.ModuleID{"listener.http"}},
	// A Gateway that asks for an address without a value gets one: the controller's pool address
	// or its --status-address, like a Gateway that asks for none.
	{Name: gwfeatures.SupportGatewayAddressEmpty, Requires: []core.ModuleID{"listener.http"}},
	// A Gateway's IPAddress spec.addresses are its listeners' bind addresses; the proxy reports
	// one it cannot bind (AddressNotUsable) and other address types are not accepted
	// (UnsupportedAddress).
	{Name: gwfeatures.SupportGatewayStaticAddresses, Requires: []core.ModuleID{"listener.http"}},
	// spec.addresses[].routability (GEP-5093): the default and the conformance sentinel are
	// given, every status address reports its routability, AddressesAssigned says which entries
	// are satisfied. Not GatewayAddressRoutabilityCluster: no address Coxswain gives is a Service
	// ClusterIP (controller/translator/routability.go).
	{Name: gwfeatures.SupportGatewayAddressRoutability, Requires: []core.ModuleID{"listener.http"}},
	// The proxy picks the most specific listener hostname of a port and never falls back to a less
	// specific one, so a listener's routes never answer for another listener.
	{Name: gwfeatures.SupportGatewayHTTPListenerIsolation, Requires: []core.ModuleID{"listener.http"}},
	// An HTTPS request whose Host belongs to another listener than its TLS server name gets 421.
	{Name: gwfeatures.SupportGatewayHTTPSListenerDetectMisdirectedRequests, Requires: []core.ModuleID{"listener.https"}},
	{Name: gwfeatures.SupportReferenceGrant, Requires: []core.ModuleID{"listener.http"}},
	// ListenerSet listeners are the Gateway's listeners with an owner (translator/listenerset.go).
	{Name: gwfeatures.SupportListenerSet, Requires: []core.ModuleID{"listener.http"}},
	// Routes yielding one intersected hostname are ordered by their own hostname's specificity
	// before their rules' precedence (controller/translator/intersection.go), for every kind.
	{Name: gwfeatures.SupportGatewayRouteHostnameIntersectionPrecedence, Requires: []core.ModuleID{"listener.http"}},
	// listeners[].filters.requests (GEP-5224): the route filters' own translators and modules,
	// run by the proxy before routing (controller/translator/listenerfilters.go,
	// core/proxy/listenerfilters.go).
	{Name: gwfeatures.SupportGatewayListenerFilters, Requires: []core.ModuleID{"listener.http"}},
	// Client certificate validation (Gateway spec.tls.frontend) is translated by the core passes
	// and enforced by listener.https, per Server: AllowValidOnly and AllowInsecureFallback, with
	// CAs from ConfigMaps and ClusterTrustBundles. ClusterTrustBundle is a union feature: claimed
	// with BackendTLSPolicy it also promises ClusterTrustBundle CAs there.
	{Name: gwfeatures.SupportGatewayFrontendClientCertificateValidation, Requires: []core.ModuleID{"listener.https"}},
	{Name: gwfeatures.SupportGatewayFrontendClientCertificateValidationInsecureFallback, Requires: []core.ModuleID{"listener.https"}},
	{Name: gwfeatures.SupportClusterTrustBundle, Requires: []core.ModuleID{"listener.https"}},
}

// Supported returns the features reg can serve, sorted by name and without duplicates: the Core
// features plus those of every Provider module, each kept only when its Requires are all in reg.
func Supported(reg *core.Registry) []gwapiv1.SupportedFeature {
	all := append([]translation.Feature(nil), Core...)
	for _, id := range reg.IDs() {
		info, _ := reg.Lookup(id)
		if p, ok := info.New().(translation.FeatureProvider); ok {
			all = append(all, p.GatewayAPIFeatures()...)
		}
	}
	seen := map[gwfeatures.FeatureName]bool{}
	var out []gwapiv1.SupportedFeature
	for _, f := range all {
		if seen[f.Name] || !servable(reg, f) {
			continue
		}
		seen[f.Name] = true
		out = append(out, gwapiv1.SupportedFeature{Name: gwapiv1.FeatureName(f.Name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func servable(reg *core.Registry, f translation.Feature) bool {
	for _, id := range f.Requires {
		if !reg.Has(id) {
			return false
		}
	}
	return true
}
