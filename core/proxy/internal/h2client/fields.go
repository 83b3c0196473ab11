package h2client

import (
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

func hpackField(name, value string) hpack.HeaderField {
	return hpack.HeaderField{Name: name, Value: value}
}

// ValidField reports whether a field may be sent as is: a lower-case token name and a value
// without CR, LF or NUL (anything else is dropped, never smuggled into another field).
func ValidField(name, value string) bool {
	return httpguts.ValidHeaderFieldName(name) && httpguts.ValidHeaderFieldValue(value)
}

// LowerName is the HTTP/2 (lower-case) form of a canonical header name, without allocating for
// the common ones.
func LowerName(k string) string {
	if v, ok := lowerNames[k]; ok {
		return v
	}
	return strings.ToLower(k)
}

// CanonicalName is the canonical form of a received lower-case name, without allocating for the
// common ones.
func CanonicalName(k string) string {
	if v, ok := canonicalNames[k]; ok {
		return v
	}
	return http.CanonicalHeaderKey(k)
}

var lowerNames, canonicalNames = func() (map[string]string, map[string]string) {
	lower, canon := map[string]string{}, map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Content-Encoding", "Content-Length", "Content-Type", "Cookie", "Date", "Etag", "Grpc-Accept-Encoding",
		"Grpc-Encoding", "Grpc-Message", "Grpc-Status", "Grpc-Status-Details-Bin", "Grpc-Timeout", "Last-Modified",
		"Location", "Origin", "Referer", "Server", "Set-Cookie", "Te", "Trailer", "User-Agent", "Vary",
		"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id"} {
		lower[k] = strings.ToLower(k)
		canon[strings.ToLower(k)] = k
	}
	return lower, canon
}()

// AddFields adds received fields to h under their canonical names (key maps a canonical name to
// the key to use: itself, or a trailer's http.TrailerPrefix form), with one allocation for all
// the values.
func AddFields(h http.Header, fields []hpack.HeaderField, key func(string) string) {
	if len(fields) == 0 {
		return
	}
	vals := make([]string, len(fields))
	for i, hf := range fields {
		k := key(CanonicalName(hf.Name))
		vals[i] = hf.Value
		if prev, ok := h[k]; ok {
			h[k] = append(prev[:len(prev):len(prev)], hf.Value)
			continue
		}
		h[k] = vals[i : i+1 : i+1]
	}
}
