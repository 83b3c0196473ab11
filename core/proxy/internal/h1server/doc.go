// Package h1server is the engine's own HTTP/1.1 server (the default for listener.http and
// listener.https; docs/architecture.md). The engine gives it a Config: the handler every request
// goes to, the limits, and the HTTP/2 server to hand HTTP/2 connections to. It knows nothing of
// routes, tables or upstreams.
//
// What the engine may rely on beyond http.Handler:
//   - the ResponseWriter is a *Writer (unless a filter wrapped it): Status, Written and Arrived
//     describe the response for metrics and the access log, Scratch is the engine's per-connection
//     value (Config.NewScratch);
//   - Writer.Watch(r) is the watch of the client connection, for an upstream exchange to be
//     unblocked when the client goes away (ClientWatch);
//   - Writer.Values(n) is the connection's slice for the values of a response header copied in
//     whole (an upstream's), reused like the header map;
//   - a request body of the server is a *Body, whose Ready says whether more of it can be read
//     without waiting.
//
// Requests are parsed strictly (RFC 9112: no bare LF, no obs-fold, one framing, one Host) with
// the syntax in h1wire; anything two parsers could disagree on is refused with a status and the
// connection closed.
package h1server
