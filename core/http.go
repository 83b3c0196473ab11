package core

import (
	"net/http"
	"time"
)

// HTTPMatcher is implemented by route-kind modules for HTTP-family listeners ("route.http",
// "route.grpc"). One instance is loaded per IR Route, with that route's match as its config; the
// engine asks it whether a request (already selected by listener, hostname and precedence order)
// matches. Match runs on the hot path: no allocation, no locks, no regex compilation.
type HTTPMatcher interface {
	Match(r *http.Request) bool
}

// HTTPErrorWriter is optionally implemented by an HTTPMatcher whose protocol reports errors its own
// way (gRPC answers with a grpc-status, not an HTML page). The engine uses it for every error it
// answers on a matched route: no backend, unresolved backend, no healthy endpoint, upstream failure.
type HTTPErrorWriter interface {
	WriteError(w http.ResponseWriter, r *http.Request, status int, msg string)
}

// HTTPTrailerErrorWriter is optionally implemented by an HTTPErrorWriter whose protocol can report
// an error after the response header was sent, in trailers (gRPC's grpc-status). When the upstream
// response body fails mid-stream (the backend reset the stream or dropped its connection), the
// engine calls WriteTrailerError with the status it would have answered (502, or 504 past the
// request's deadline) and ends the response normally with the trailers it set, instead of
// aborting the stream, which a gRPC client could only report as INTERNAL. Not called when the
// client itself went away.
type HTTPTrailerErrorWriter interface {
	HTTPErrorWriter
	WriteTrailerError(trailer http.Header, r *http.Request, status int, msg string)
}

// HTTPDeadliner is optionally implemented by an HTTPMatcher whose protocol carries the client's
// deadline in the request (gRPC's grpc-timeout). The engine bounds the request by it as by a
// route timeout (the shorter wins), so an exchange that outlives the client's deadline is
// answered as a timeout (504, DEADLINE_EXCEEDED for gRPC) whether the engine or the backend
// notices first. RequestTimeout runs on the hot path: no allocation.
type HTTPDeadliner interface {
	RequestTimeout(r *http.Request) (d time.Duration, ok bool)
}

// HTTPProtocolErrorWriter is optionally implemented by an HTTPErrorWriter matcher whose protocol
// needs its own error form even when no route matched: a gRPC client cannot read a plain 404, it
// expects a grpc-status. The engine answers a request that no route of its listener matches with
// 404; when a route module of the table claims the request (ClaimsRequest, e.g. content-type
// application/grpc), that module's WriteError answers the 404 instead. ClaimsRequest runs on the
// hot path of unrouted requests: no allocation.
type HTTPProtocolErrorWriter interface {
	HTTPErrorWriter
	ClaimsRequest(r *http.Request) bool
}

// A filter module ("filter.http.*", "filter.ext.*") implements at least one of HTTPRequestFilter,
// HTTPResponseFilter and HTTPMiddleware. The engine compiles a rule's filters into a chain once per
// snapshot; per request it only calls them.

// HTTPRequestFilter runs before the request is sent upstream, in the order the rule lists filters.
// It may modify r. To answer the request itself (a redirect, a denial) it writes the response to w
// and returns false; the chain stops there.
type HTTPRequestFilter interface {
	FilterRequest(w http.ResponseWriter, r *http.Request) (proceed bool)
}

// HTTPResponseFilter runs on the upstream response's header before it is written to the client.
// r is the request as it was sent upstream.
type HTTPResponseFilter interface {
	FilterResponse(r *http.Request, status int, header http.Header)
}

// HTTPLocalResponseFilter is optionally implemented by a filter whose response headers belong on
// the responses the engine makes itself too, not only on the upstream's: the engine's errors on
// the route (no backend, no endpoint, 502, 503, 504), and the answer of a request filter that
// runs after it in the chain (a denial). CORS is the case: a browser hides from the page any
// answer without Access-Control-Allow-Origin, errors included. It is called instead of
// FilterResponse, never with it, on the header before it is written.
type HTTPLocalResponseFilter interface {
	FilterLocalResponse(r *http.Request, status int, header http.Header)
}

// HTTPMiddleware wraps the rest of the chain, for filters that must see the body or the whole
// exchange (compression, mirroring). Wrap is called once per table build, never per request.
type HTTPMiddleware interface {
	WrapHTTP(next http.Handler) http.Handler
}
