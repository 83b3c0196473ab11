// Package translation is the contract between the translator's core passes (controller/translator)
// and the controller halves of modules. A module's translate/ package imports this package and
// core, never controller/; controller/ implements the interfaces here (RouteContext) and calls the
// ones modules implement (RouteKind, FilterTranslator, ExtensionResolver). A new route kind or
// filter is therefore one package plus one import line: Store, informers, the standalone loader,
// status writing and `validate` all work from what the registered modules declare.
//
// # Namespaces
//
//	translate.route.<name>          a RouteKind: an API resource whose objects attach to Gateway
//	                                listeners (HTTPRoute, GRPCRoute, TCPRoute, ...)
//	translate.filter.<name>         a FilterTranslator: one Gateway API filter type
//	                                (RequestHeaderModifier, URLRewrite, ...) into its filter.http.*
//	                                module's config
//	translate.filter.ext.<g>.<Kind> an optional ExtensionResolver for the ExtensionRef filter
//	                                module filter.ext.<g>.<Kind>; without one, the referenced
//	                                object's .spec is the module's config as it is
//
// # Route kinds
//
// The core passes do everything Gateway API specifies once for every route kind: GatewayClass and
// Gateway validation, listener conflicts, parentRef attachment (sectionName, port),
// allowedRoutes, hostname intersection, ReferenceGrant checks, backend resolution, precedence
// tie-breaking and status. A RouteKind says what is specific to it: its API (RouteAPI: GVK, Go
// type, plural, defaulting, status), the listener protocols it attaches to, and, through Route,
// how to read one object's parentRefs and hostnames and how to build its rules (Build). Build
// runs once with a zero listener to validate the route (so its problems are known before
// attachment decides Accepted), then once per programmed listener the route attaches to; it
// returns one Entry per match with a Precedence vector. It reports through its RouteContext:
//
//	Backend(field, ref, filters)  resolves a backendRef (Service → Cluster, ReferenceGrant); an
//	                              unresolved one is an error backend (500 for its share) and
//	                              ResolvedRefs=False with the spec's reason
//	Filters(field, filters, env)  the one filter path of every route kind: each filter type's
//	                              registered FilterTranslator, ExtensionRefs through their
//	                              filter.ext.* module
//	DropRule(rule, field, ...)    an invalid rule is left out (the spec's "Drop Rule(s)")
//	FailRule(rule, field, ...)    the rule stays and answers 500 (a filter that cannot run must
//	                              not be skipped)
//	Unresolved(field, reason, ..) ResolvedRefs=False for some other reference
//
// Build must be deterministic, and whether a rule is valid must not depend on the listener (the
// validation pass has none); only the values emitted may (a redirect's listener port, say).
//
// Optional traits, found by type assertion: ExclusiveKind (routes without matches: the oldest
// route of a virtual host takes it), ClusterKind (backends that are not HTTP/1.1 servers),
// ErrorAnswerKind (what a client sees instead of a 500), HostnameExclusiveKind (kinds that must
// not share a listener hostname with another kind), and FeatureProvider (the Gateway API
// features the module makes servable, each with the proxy modules it needs).
//
// # Versioning
//
// This package is the module API of the controller side. Within a minor release of Coxswain it
// only grows: new optional interfaces and new methods on RouteContext (which modules call but do
// not implement). Changing or removing anything a module implements is a breaking change noted
// in the release notes; docs/modules.md says the same.
package translation
