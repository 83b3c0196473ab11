// Package compression is the Compression filter, "filter.ext.gateway.coxswain-labs.dev.Compression":
// it compresses response bodies with gzip or brotli for the clients that accept them. An HTTPRoute
// rule references a Compression object with an ExtensionRef filter; the object's spec is this
// module's Config.
//
// It is a core.HTTPMiddleware: it wraps the rest of the rule's chain with a response writer that
// decides at the response header whether to compress, and then streams. Nothing is compressed
// that should not be: a HEAD, a Range request or its 206, a 204 or 304, an upgrade, gRPC, a body
// already encoded or marked no-transform, a type not listed, a body below MinSize (known from
// Content-Length, or by holding back at most MinSize bytes when there is none). A compressed
// response loses its Content-Length and Accept-Ranges, its strong ETag becomes weak (the bytes
// differ from the identity representation's) and it says Vary: Accept-Encoding, as does the
// identity response a client that accepts no coding gets for the same resource.
package compression

import (
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*Compression)(nil))
}

var (
	_ core.ExtensionKind  = (*Compression)(nil)
	_ core.HTTPMiddleware = (*Compression)(nil)
	_ core.Provisioner    = (*Compression)(nil)
	_ core.Validator      = (*Compression)(nil)
	_ core.ConfigChecker  = (*Compression)(nil)
	_ core.ConfigWarner   = (*Compression)(nil)
)

// API is the resource behind this module's ExtensionRefs. A reference to a Compression object that
// does not exist fails open (the rule is served uncompressed; the route says why). GRPCRoute rules
// cannot use it: gRPC compresses its messages itself.
var API = core.ExtensionAPI{
	Group:    "gateway.coxswain-labs.dev",
	Kind:     "Compression",
	Version:  "v1alpha1",
	Resource: "compressions",
	FailOpen: true,
}

// Compression is the module.
type Compression struct {
	Config

	gzipOn  bool
	level   int
	minSize int64
	exact   []string // media types, lower case
	wild    []string // "text/" for "text/*"
}

// CoxswainModule implements core.Module.
func (*Compression) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Compression) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*Compression) ExtensionAPI() core.ExtensionAPI { return API }

// ExtensionRouteKinds implements core.ExtensionRouteKinds.
func (*Compression) ExtensionRouteKinds() (supported, ignored []string) {
	return []string{"HTTPRoute", "Ingress"}, nil
}

// CheckConfig implements core.ConfigChecker.
func (c *Compression) CheckConfig() error {
	if c.Level < 0 || c.Level > 9 {
		return fmt.Errorf("level %d: want 1 to 9", c.Level)
	}
	if c.MinSize != nil && (*c.MinSize < 0 || *c.MinSize > 1<<20) {
		return fmt.Errorf("minSize %d: want 0 to 1048576", *c.MinSize)
	}
	if len(c.Types) > 64 {
		return fmt.Errorf("types: %d entries, at most 64", len(c.Types))
	}
	seen := map[string]bool{}
	for i, t := range c.Types {
		if err := checkType(t); err != nil {
			return fmt.Errorf("types[%d]: %w", i, err)
		}
		if seen[strings.ToLower(t)] {
			return fmt.Errorf("types[%d]: %q is listed twice", i, t)
		}
		seen[strings.ToLower(t)] = true
	}
	return nil
}

// checkType accepts "type/subtype" and "type/*" made of token characters.
func checkType(t string) error {
	top, sub, ok := strings.Cut(t, "/")
	if !ok || len(t) > 127 || !token(top) || (sub != "*" && !token(sub)) {
		return fmt.Errorf("%q is not a media type (type/subtype or type/*, without parameters)", t)
	}
	return nil
}

func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("!#$&^_.+-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Validate implements core.Validator.
func (c *Compression) Validate() error { return c.CheckConfig() }

// ConfigWarnings implements core.ConfigWarner.
func (c *Compression) ConfigWarnings() []string {
	var out []string
	if c.Gzip != nil && !*c.Gzip && !c.Brotli {
		out = append(out, "neither gzip nor brotli is enabled: nothing is compressed")
	}
	for _, t := range c.Types {
		if grpcType(t) {
			out = append(out, fmt.Sprintf("types: %s is never compressed (gRPC compresses its own messages); ignored", t))
		}
	}
	return out
}

// Provision applies the defaults and compiles the type list.
func (c *Compression) Provision(bc *core.BuildContext) error {
	if err := c.CheckConfig(); err != nil {
		return err
	}
	c.gzipOn = c.Gzip == nil || *c.Gzip
	c.level = int(c.Level)
	if c.level == 0 {
		c.level = DefaultLevel
	}
	c.minSize = DefaultMinSize
	if c.MinSize != nil {
		c.minSize = int64(*c.MinSize)
	}
	types := c.Types
	if len(types) == 0 {
		types = DefaultTypes
	}
	for _, t := range types {
		t = strings.ToLower(t)
		switch {
		case grpcType(t):
		case strings.HasSuffix(t, "/*"):
			c.wild = append(c.wild, strings.TrimSuffix(t, "*"))
		default:
			c.exact = append(c.exact, t)
		}
	}
	if bc != nil {
		for _, w := range c.ConfigWarnings() {
			bc.Log.Warn("Compression config", zap.String("warning", w))
		}
	}
	return nil
}

// grpcType is application/grpc and its +proto, +json... variants.
func grpcType(t string) bool {
	t = strings.ToLower(t)
	return t == "application/grpc" || strings.HasPrefix(t, "application/grpc+")
}

// compressible reports whether a Content-Type value is one of the types, its parameters ignored.
// It runs on every response: no allocation.
func (c *Compression) compressible(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = trimOWS(mt)
	if len(mt) >= len("application/grpc") && strings.EqualFold(mt[:len("application/grpc")], "application/grpc") {
		return false
	}
	for _, t := range c.exact {
		if strings.EqualFold(mt, t) {
			return true
		}
	}
	for _, w := range c.wild {
		if len(mt) > len(w) && strings.EqualFold(mt[:len(w)], w) {
			return true
		}
	}
	return false
}

// WrapHTTP implements core.HTTPMiddleware.
func (c *Compression) WrapHTTP(next http.Handler) http.Handler {
	return &handler{c: c, next: next}
}

type handler struct {
	c    *Compression
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Requests whose answer is never compressed are not wrapped at all: no Vary either, since
	// Accept-Encoding changes nothing for them.
	if r.Method == http.MethodHead || r.Method == http.MethodConnect || len(r.Header["Range"]) > 0 ||
		len(r.Header["Upgrade"]) > 0 || core.IsGRPC(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	cw := &writer{c: h.c, w: w, enc: negotiate(r.Header["Accept-Encoding"], h.c.gzipOn, h.c.Brotli)}
	finished := false
	defer func() {
		if !finished { // the handler panicked (an aborted response): drop the encoder, write nothing
			cw.abandon()
		}
	}()
	h.next.ServeHTTP(cw, r)
	cw.finish()
	finished = true
}

// skip reports whether a response status or header rules compression out.
func skip(status int, h http.Header) bool {
	switch status {
	case http.StatusNoContent, http.StatusPartialContent, http.StatusNotModified:
		return true
	}
	if ce := h["Content-Encoding"]; len(ce) > 0 && ce[0] != "" {
		return true
	}
	return hasToken(h["Cache-Control"], "no-transform") || len(h["Content-Range"]) > 0
}

// addVary appends Accept-Encoding to the Vary field unless it is there (or Vary is "*").
func addVary(h http.Header) {
	v := h["Vary"]
	if hasToken(v, "accept-encoding") || hasToken(v, "*") {
		return
	}
	h["Vary"] = append(v[:len(v):len(v)], "Accept-Encoding")
}

// weakenETag turns a strong validator into a weak one: the compressed bytes are not the identity
// representation's, so a strong ETag would make a Range or If-Match on one apply to the other.
func weakenETag(h http.Header) {
	if e := h["Etag"]; len(e) == 1 && strings.HasPrefix(e[0], `"`) {
		h["Etag"] = []string{"W/" + e[0]}
	}
}

// eventStream types are decided at the header: a stream has no size to wait for.
func eventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(trimOWS(mt), "text/event-stream")
}

// header values shared by every compressed response (cap == len: an append copies).
var (
	gzipValue   = []string{"gzip"}
	brotliValue = []string{"br"}
)

func (e encoding) value() []string {
	if e == brotliEnc {
		return brotliValue[:1:1]
	}
	return gzipValue[:1:1]
}
