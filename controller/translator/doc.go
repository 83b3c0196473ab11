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
// What is specific to one route kind — its matches and filters — lives in a module in namespace
// "translate.route" (modules/httproute/translate registers "translate.route.http"). Such a module
// implements RouteKind:
//
//	GroupKind()  the resource, for allowedRoutes.kinds and supportedKinds
//	Protocols()  the listener protocols it attaches to
//	Routes(s)    its objects in the Store, each as a Route
//
// and each Route gives its metadata, parentRefs and hostnames, and Build(rc): the IR routes of its
// rules for one attached listener, one Entry per match with a Precedence vector. Build runs once
// with a zero listener to validate the route (so its problems are known before attachment
// decides Accepted), then once per programmed listener the route attaches to.
//
// The core sorts the entries of a virtual host by Precedence (larger first, element-wise), then
// by the spec's cross-route tie-breaks: oldest creationTimestamp, then "<namespace>/<name>",
// then rule index, then match index.
//
// Build reports through the RouteContext:
//
//	Backend(field, ref, filters)  resolves a backendRef (Service → Cluster, ReferenceGrant);
//	                              an unresolved one is an error backend (500 for its share) and
//	                              ResolvedRefs=False with the spec's reason
//	DropRule(rule, field, ...)    an invalid rule is left out: Accepted stays True with
//	                              PartiallyInvalid "Dropped Rule ...", or turns False when no
//	                              rule is left (the spec's "Drop Rule(s)" approach)
//	FailRule(rule, field, ...)    the same status, but the rule stays and answers 500 (a filter
//	                              that cannot run must not be skipped); the message says "it
//	                              answers 500", or what an ErrorAnswerKind's clients see instead
//	Unresolved(field, reason, ..) ResolvedRefs=False for some other reference
//
// Build must be deterministic, and whether a rule is valid must not depend on the listener (the
// validation pass has none); only the values emitted may (a redirect's listener port, say).
//
// Adding a route kind therefore means one module and one slice in Store; no core pass changes.
// The binary must import the module (cmd/coxswain does for HTTPRoute); a build without any
// route kind is reported as a Problem, since every listener would be UnsupportedProtocol.
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
// TCPRoute, TLSRoute and UDPRoute implement ExclusiveKind: the oldest route of a virtual host
// (a TCP or UDP listener, a TLS hostname) is the only one placed in the snapshot; the others
// stay Accepted, count in attachedRoutes and get Conflicted=True (ShadowedByOlderRoute). They
// implement ClusterKind too: their backendRefs resolve to TCP or UDP clusters of their own.
// SingleRule builds their one entry.
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
