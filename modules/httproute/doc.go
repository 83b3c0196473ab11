// Package httproute is Gateway API's HTTPRoute. It has two halves that share only the config types
// in config.go:
//
//   - This package is the proxy half: the "route.http" module, a core.HTTPMatcher that decides
//     whether a request satisfies one HTTPRouteMatch. It imports neither Kubernetes nor fx.
//   - translate/ is the controller half: it turns HTTPRoute objects into IR routes, one per
//     HTTPRouteMatch, each carrying a route.http ModuleConfig built from Match.
//
// Everything a rule needs beyond its match is the engine's business: host selection, precedence
// order (the OR across a rule's matches is the order of IR routes), filters and backends. What is
// left here is one AND of conditions, compiled once in Provision and evaluated per request without
// allocating.
//
// Semantics the spec leaves to the implementation, and what route.http does:
//
//   - Path: matched against url.URL.Path, the percent-decoded path, as it stands when the request
//     reaches the route, without cleaning ("." and ".." segments, repeated slashes). Whatever
//     normalisation the proxy applies is applied once, before routing, so that the path a route
//     matched is the path its filters and the backend see; a matcher that cleaned privately would
//     let "/public/../admin" match "/public" and reach the backend as written. Exact and PathPrefix
//     values may contain %XX escapes (the API allows them); they are decoded at Provision, so
//     "/a%20b" matches the request path "/a%20b". RegularExpression is RE2, anchored at both ends,
//     and sees the decoded path.
//   - Headers: the name is case-insensitive; "Host" is the request's Host (Go keeps it out of
//     Header). A header sent several times is matched as the RFC 7230 §3.2.2 combination of its
//     values, which is what the spec points to: joined with "," (and with "; " for Cookie, which
//     HTTP/2 splits). Exact compares that whole value; RegularExpression (RE2, unanchored) searches it.
//   - Query parameters: the name is case-sensitive; the value compared is the first one, as the
//     spec recommends, and exactly what r.URL.Query().Get(name) would return (a pair containing ';'
//     or a bad escape is skipped, '+' is a space), found by scanning RawQuery without building a map.
//   - Only the first of several conditions on an equivalent header name (or the same query name)
//     counts; later ones are ignored, as the spec requires.
package httproute
