package core

import (
	"net/http"
	"strconv"
	"strings"
)

// GRPCCode is a gRPC status code. The values are fixed by the gRPC protocol; only those the
// engine and the stock filters answer with are named, so that the proxy does not link the gRPC
// library for a few constants.
type GRPCCode uint32

// gRPC status codes (https://grpc.github.io/grpc/core/md_doc_statuscodes.html).
const (
	GRPCOK                GRPCCode = 0
	GRPCUnknown           GRPCCode = 2
	GRPCInvalidArgument   GRPCCode = 3
	GRPCDeadlineExceeded  GRPCCode = 4
	GRPCPermissionDenied  GRPCCode = 7
	GRPCResourceExhausted GRPCCode = 8
	GRPCUnimplemented     GRPCCode = 12
	GRPCInternal          GRPCCode = 13
	GRPCUnavailable       GRPCCode = 14
	GRPCUnauthenticated   GRPCCode = 16
)

// IsGRPC reports whether r is a gRPC call (content-type application/grpc or application/grpc+*),
// whose client can read only a grpc-status, not an HTTP error page.
func IsGRPC(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	return strings.HasPrefix(ct, "application/grpc") && (len(ct) == len("application/grpc") || ct[len("application/grpc")] == '+' || ct[len("application/grpc")] == ';')
}

// WriteGRPCStatus writes a trailers-only gRPC response: HTTP 200 and content-type
// application/grpc, with grpc-status and grpc-message in the header block and no body, which an
// HTTP/2 server sends as a single HEADERS frame ending the stream. Headers already set on w (say,
// by a filter) stay, except a Content-Length, which cannot hold for a body-less answer.
func WriteGRPCStatus(w http.ResponseWriter, code GRPCCode, msg string) {
	h := w.Header()
	h.Del("Content-Length")
	h["Content-Type"] = []string{"application/grpc"}
	h["Grpc-Status"] = []string{strconv.FormatUint(uint64(code), 10)}
	if msg != "" {
		h["Grpc-Message"] = []string{EncodeGRPCMessage(msg)}
	}
	w.WriteHeader(http.StatusOK)
}

// Deny answers a request a filter rejects: to a gRPC call, a trailers-only response with code
// and msg; to anything else, status with msg as a plain-text body. Headers the filter set on w
// before (Retry-After, WWW-Authenticate) are sent either way.
func Deny(w http.ResponseWriter, r *http.Request, status int, code GRPCCode, msg string) {
	if IsGRPC(r) {
		WriteGRPCStatus(w, code, msg)
		return
	}
	h := w.Header()
	h["Content-Type"] = []string{"text/plain; charset=utf-8"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

// EncodeGRPCMessage percent-encodes a grpc-message as the gRPC HTTP/2 protocol requires: every
// byte outside printable ASCII, and '%' itself.
func EncodeGRPCMessage(msg string) string {
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
