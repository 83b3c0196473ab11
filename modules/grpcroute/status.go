package grpcroute

import (
	"net/http"
	"strconv"

	"github.com/coxswain-labs/coxswain/core"
)

// Code is a gRPC status code (core.GRPCCode; the constants are named there too).
type Code = core.GRPCCode

// gRPC status codes the engine's errors map to.
const (
	CodeOK               = core.GRPCOK
	CodeUnknown          = core.GRPCUnknown
	CodeDeadlineExceeded = core.GRPCDeadlineExceeded
	CodePermissionDenied = core.GRPCPermissionDenied
	CodeUnimplemented    = core.GRPCUnimplemented
	CodeInternal         = core.GRPCInternal
	CodeUnavailable      = core.GRPCUnavailable
	CodeUnauthenticated  = core.GRPCUnauthenticated
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

// WriteStatus writes a trailers-only gRPC response (core.WriteGRPCStatus).
func WriteStatus(w http.ResponseWriter, code Code, msg string) { core.WriteGRPCStatus(w, code, msg) }

func encodeMessage(msg string) string { return core.EncodeGRPCMessage(msg) }
