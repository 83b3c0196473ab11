// Package filters holds one package per HTTP filter module and documents the contract of the two
// filter namespaces. It has no code of its own.
//
// # Namespaces
//
//	filter.http.<name>           a Gateway API filter type: request_header_modifier,
//	                             response_header_modifier, request_redirect, url_rewrite, ...
//	                             Its controller half is a translate.filter.<name> module in the
//	                             package's translate/ subpackage (translation.FilterTranslator),
//	                             which validates the Gateway API filter, builds the config and
//	                             claims the filter's conformance features.
//	filter.ext.<group>.<Kind>    an ExtensionRef filter. It implements core.ExtensionKind, naming
//	                             the resource its ExtensionRefs refer to; the controller watches
//	                             that resource and copies the referenced object's .spec into the
//	                             module's config (checked with the module's strict decode and its
//	                             optional core.ConfigChecker), so a third party writes only this
//	                             module, no controller code. One that needs references resolved
//	                             (Secrets, remote documents) adds a translate.filter.ext.<group>.<Kind>
//	                             module (translation.ExtensionResolver) that runs in the controller.
//
// # What a filter module implements
//
// Besides core.Module, at least one of:
//
//   - core.HTTPRequestFilter: runs before the request goes upstream, in the order the rule lists
//     its filters. It may modify the request; to answer it itself (a redirect, a denial) it writes
//     the response and returns false, and the chain stops.
//   - core.HTTPResponseFilter: edits the upstream response's header before it is
//     written to the client.
//   - core.HTTPMiddleware: wraps the rest of the chain, for filters that must see bodies or the
//     whole exchange. Wrap runs once per table build.
//
// The engine loads a filter with core.Load, once per snapshot, and checks the interface; a module
// that a snapshot names but this binary lacks fails the route loudly (the spec forbids skipping a
// filter silently).
//
// # Rules
//
//   - Config is decoded strictly: the module's exported fields are its JSON config, and an unknown
//     field is an error. Config types live next to the module (config.go) because its translate/
//     half imports them to build configs; they must not import Kubernetes, fx or anything heavy.
//   - Provision compiles everything: canonical header names, parsed paths, regular expressions,
//     precomputed values. Validate rejects what the proxy cannot do safely (a CR or LF in a header
//     value, a status code outside the API's enum).
//   - The per-request methods run concurrently on the hot path: no locks, no regex compilation,
//     no JSON, no maps built, and as few allocations as the job allows. Each filter package has
//     benchmarks with b.ReportAllocs to keep it honest.
//   - A filter never reads global state and never logs per request.
//
// # Testing a filter
//
// filtertest runs filter modules against real requests through the real engine: one HTTP
// listener on loopback, one route whose filters are the given ModuleConfigs (loaded exactly as a
// snapshot's would be), and a real backend that records what it received. A module's tests,
// in this tree or in a third party's own Go module (examples/custom-filter), use it to check
// what reaches the backend, not just what the filter did to an *http.Request.
//
// pathmod is not a module: it is Gateway API's HTTPPathModifier (ReplaceFullPath,
// ReplacePrefixMatch) and the element-wise PathPrefix rule, shared by redirect, rewrite and the
// route.http matcher so that a rewrite replaces exactly the prefix its route matched.
package filters
