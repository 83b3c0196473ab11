// Package h1wire is HTTP/1.1 syntax shared by the engine's own HTTP/1.1 server (h1server) and its
// upstream client (the forwarder in core/proxy): header field validation and canonical names
// (RFC 9110 tokens, RFC 9112 §5), the strict chunked decoder (RFC 9112 §7.1), and the upstream
// response head with its framing checks (RFC 9112 §6.3). Every check here is one a smuggling or
// splitting attack must get past, so each has a fuzz target beside it (docs/reliability.md).
//
// Parsers work on offsets into one byte slice per header block, so that a request or response
// head becomes a single string and its fields need no allocation each.
package h1wire
