package grpcroute

import (
	"net/http"
	"strconv"
)

// Code is a gRPC status code. The values are fixed by the gRPC protocol; only those the engine's
// errors map to are named, so the proxy does not link the gRPC library for a few constants.
type Code uint32

// gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html).
const (
	CodeOK               Code = 0
	CodeUnknown          Code = 2
	CodeDeadlineExceeded Code = 4
	CodePermissionDenied Code = 7
	CodeUnimplemented    Code = 12
	CodeInternal         Code = 13
	CodeUnavailable      Code = 14
	CodeUnauthenticated  Code = 16
)

// CodeForHTTP maps an HTTP status the engine answers with to the gRPC code a client should see.
// It follows gRPC's own HTTP-to-gRPC mapping, except that 500 is UNAVAILABLE: the engine answers
// 500 only for a rule without a usable backend, and GRPCRoute asks for UNAVAILABLE there.
func CodeForHTTP(status int) Code {
	switch status {
	case http.StatusNotFound:
		return CodeUnimplemented
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusTooManyRequests:
		return CodeUnavailable
	case http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return CodeDeadlineExceeded
	case http.StatusBadRequest:
		return CodeInternal
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	}
	return CodeUnknown
}

// WriteError implements core.HTTPErrorWriter: a trailers-only gRPC response carrying the code
// status maps to and msg.
func (*Matcher) WriteError(w http.ResponseWriter, _ *http.Request, status int, msg string) {
	WriteStatus(w, CodeForHTTP(status), msg)
}

// WriteTrailerError implements core.HTTPTrailerErrorWriter: a backend that fails after its
// response header (stream reset, connection lost) ends the call with grpc-status and
// grpc-message trailers, UNAVAILABLE (DEADLINE_EXCEEDED past the client's deadline), as a lost
// connection ends a direct call. A reset or a drop otherwise reaches the client as RST_STREAM,
// which gRPC reports as INTERNAL.
//
// A message the backend had only partly sent stays cut: the engine never holds back bytes it
// received, so the client, which cannot parse the truncated message, still reports INTERNAL.
// Backends send small messages in one DATA frame, which the engine forwards whole.
func (*Matcher) WriteTrailerError(trailer http.Header, _ *http.Request, status int, msg string) {
	trailer["Grpc-Status"] = []string{strconv.FormatUint(uint64(CodeForHTTP(status)), 10)}
	trailer["Grpc-Message"] = []string{encodeMessage("backend failed mid-stream: " + msg)}
}

// WriteStatus writes a trailers-only gRPC response: HTTP 200 and content-type application/grpc,
// with grpc-status and grpc-message in the header block and no body, which an HTTP/2 server sends
// as a single HEADERS frame ending the stream. Headers already set on w (say, by a filter) stay,
// except a Content-Length, which cannot hold for a body-less answer.
func WriteStatus(w http.ResponseWriter, code Code, msg string) {
	h := w.Header()
	h.Del("Content-Length")
	h["Content-Type"] = []string{"application/grpc"}
	h["Grpc-Status"] = []string{strconv.FormatUint(uint64(code), 10)}
	if msg != "" {
		h["Grpc-Message"] = []string{encodeMessage(msg)}
	}
	w.WriteHeader(http.StatusOK)
}

// encodeMessage percent-encodes grpc-message as the gRPC HTTP/2 protocol requires: every byte
// outside printable ASCII, and '%' itself.
func encodeMessage(msg string) string {
	n := 0
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			n++
		}
	}
	if n == 0 {
		return msg
	}
	const hex = "0123456789ABCDEF"
	out := make([]byte, 0, len(msg)+2*n)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			out = append(out, '%', hex[c>>4], hex[c&15])
			continue
		}
		out = append(out, c)
	}
	return string(out)
}
