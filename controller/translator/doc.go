// Package translator compiles Gateway API objects (a Store) into the snapshot IR every proxy runs,
// and computes the status the controller writes. It is the controller half of Coxswain; it never
// imports the proxy engine.
//
// # Core passes and route kinds
//
// Everything Gateway API specifies the same way for every route kind is done here, once:
// GatewayClass and Gateway validation, listener conflicts, certificate references, parentRef
// attachment (sectionName, port), allowedRoutes (namespaces and kinds), listener × route hostname
// intersection, ReferenceGrant checks, backend resolution (Service → EndpointSlices → Cluster),
// precedence tie-breaking and status assembly.
//
// What is specific to one route kind — its API resource, matches and rules — lives in a module
// in namespace "translate.route" that implements translation.RouteKind (package
// modules/translation, the contract: read its doc). What is specific to one filter type lives in
// a "translate.filter" module (translation.FilterTranslator), and an ExtensionRef filter is the
// filter.ext.<group>.<Kind> module's, configured with the referenced object's .spec (filters.go)
// or what its optional "translate.filter.ext.*" resolver makes of it. This package implements
// translation.RouteContext for them and never names a route kind or filter type itself: the
// Store holds route and extension objects by GroupKind (Store.Objects).
//
// The core sorts the entries of a virtual host first by the route's own hostname that yields it
// (more specific first: GatewayRouteHostnameIntersectionPrecedence, intersection.go), then by
// Precedence (larger first, element-wise), then by the spec's cross-route tie-breaks: oldest creationTimestamp, then "<namespace>/<name>",
// then rule index, then match index.
//
// A build without any route kind is reported as a Problem, since every listener would be
// UnsupportedProtocol.
//
// # Listeners
//
// A listener protocol is supported when some route kind attaches to it. Listeners sharing a
// port must be distinct (Gateway API "Distinct Listeners"): indistinct ones are all Conflicted
// and not accepted, none wins. Across Gateways, listeners on the same address, port and
// protocol share one IR listener, identical hostnames one server; the older Gateway keeps a port
// a newer one wants with another protocol (ProtocolConflict) or other certificates
// (HostnameConflict), and a port bound on all addresses excludes a specific one
// (PortUnavailable). Only IPAddress Gateway addresses are supported; they are bind addresses.
// Listeners of different protocols never share a port (HTTPS and TLS included: one socket is
// served by one listener module); TLS listeners in Passthrough and Terminate mode do (mixed
// mode, SNI tells them apart). TCP and UDP listeners ignore their hostname.
//
// # Route kinds without matches
//
// TCPRoute, TLSRoute and UDPRoute implement translation.ExclusiveKind: the oldest route of a virtual host
// (a TCP or UDP listener, a TLS hostname) is the only one placed in the snapshot; the others
// stay Accepted, count in attachedRoutes and get Conflicted=True (ShadowedByOlderRoute). They
// implement translation.ClusterKind too: their backendRefs resolve to TCP or UDP clusters of their
// own. translation.StreamKind is the whole of such a kind.
//
// # Policies
//
// A CoxswainBackendPolicy (Store.BackendPolicies; backendpolicy.go) configures the clusters of
// the Services it targets, whatever route kind reaches them: connect and idle timeouts, the
// balancer module, a circuit breaker and session persistence (layer-4 clusters take the connect
// timeout and the balancer only). It runs before the routes, so a cluster takes its settings as
// it is made. Per Service the oldest policy applies, the others are Conflicted for it. A setting
// it cannot use is ignored and its default applies (fail open), with a Warning naming the field
// and the reason in the Accepted message. Status is one ancestor entry (the Service) per
// targetRef, in Result.Policies, keyed generically (PolicyKey) for the policy kinds to come.
// A cookie's key is HMAC-SHA256(Options.SessionKey, cluster name).
//
// # Determinism
//
// Translate sorts everything it emits (see core/ir/v1/ir.proto) and seals the snapshot, so the
// same Store gives the same Snapshot.Version regardless of the order of the Store's slices.
// Condition timestamps come from Options.Now.
//
// # Programmed
//
// Here "Programmed" means "translated into the snapshot". The controller later holds Gateway
// Programmed back until proxies acknowledge the snapshot (see DESIGN.md); Result.Snapshot.Gateways
// carries the generations that gate needs.
package translator
