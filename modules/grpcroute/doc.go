// Package grpcroute is Gateway API's GRPCRoute. Like httproute it has two halves that share only
// the config types in config.go:
//
//   - This package is the proxy half: the "route.grpc" module, a core.HTTPMatcher that decides
//     whether a request satisfies one GRPCRouteMatch, and a core.HTTPErrorWriter that answers the
//     engine's errors the gRPC way. It imports neither Kubernetes nor fx.
//   - translate/ is the controller half ("translate.route.grpc"): GRPCRoute objects into IR
//     routes, one per GRPCRouteMatch.
//
// Forwarding is the engine's: a GRPCRoute's backends are clusters of protocol H2C (cleartext
// HTTP/2 with prior knowledge), and the engine's HTTP/2 forwarder streams both directions and
// passes trailers (grpc-status, grpc-message) through. Nothing here touches a message.
//
// Semantics, including those the spec leaves to the implementation:
//
//   - Only gRPC requests match: method POST and content-type application/grpc, alone or followed
//     by "+" (application/grpc+proto) or ";". gRPC-Web (application/grpc-web) and plain HTTP/1
//     requests do not: on a hostname only GRPCRoutes serve they get the engine's plain 404.
//   - Service and method come from the request path "/<service>/<method>". A path of another
//     shape matches only a match that has no method condition.
//   - RegularExpression method matches are RE2 anchored at both ends, on the service and on the
//     method separately; Exact is case-sensitive.
//   - Headers: as route.http's header matches. The name is case-insensitive; "Host" is the
//     request's authority; a header sent several times is matched as its values joined with ",";
//     Exact compares the value, RegularExpression searches it (unanchored). Binary metadata
//     ("-bin") is matched in its base64 wire form. Only the first condition on a name counts.
//
// Errors. gRPC clients cannot read an HTML or text error: every error the engine answers on a
// gRPC route is a trailers-only response (HTTP 200, content-type application/grpc, grpc-status
// and grpc-message as headers). The engine's HTTP status maps to a gRPC code:
//
//	404 (no route matched)                          UNIMPLEMENTED
//	500 (no backend, backend unresolved)            UNAVAILABLE, as GRPCRoute asks for invalid backends
//	502, 503 (upstream unreachable, no endpoint)    UNAVAILABLE
//	504, 408 (route, backend or upstream timeout)   DEADLINE_EXCEEDED
//	429                                             UNAVAILABLE
//	400                                             INTERNAL
//	401, 403                                        UNAUTHENTICATED, PERMISSION_DENIED
//	anything else                                   UNKNOWN
//
// A backend that fails after its response header went out (it reset the stream, or its
// connection dropped) ends the call with grpc-status UNAVAILABLE in trailers
// (core.HTTPTrailerErrorWriter), the messages before the failure delivered, where an aborted
// stream would reach the client as INTERNAL. A message cut in the middle stays cut (the engine
// holds back nothing), and the client reports that truncation as INTERNAL before any status.
//
// Deadlines. The client's grpc-timeout bounds the call at the proxy too (core.HTTPDeadliner; the
// shorter of it and the route's timeout wins), and any upstream failure at or past that deadline
// is DEADLINE_EXCEEDED. Without it a backend giving up at the same deadline (grpc-go resets the
// stream with CANCEL) raced the client's own timer, and the client could hear UNAVAILABLE. The
// header is forwarded unchanged; a client that cancels gets nothing more from the proxy (its
// stream is gone).
//
// The module also claims unrouted gRPC requests (core.HTTPProtocolErrorWriter): a gRPC request no
// route matches, on any HTTP listener of a table that has at least one gRPC route, gets
// UNIMPLEMENTED rather than a plain 404.
package grpcroute
