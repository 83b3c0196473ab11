// Package sizelimit is the RequestSizeLimit filter, "filter.ext.gateway.coxswain-labs.dev.RequestSizeLimit":
// it refuses request bodies larger than a limit with 413 Content Too Large. An HTTPRoute rule
// references a RequestSizeLimit object with an ExtensionRef filter; the object's spec is this
// module's Config. On a GRPCRoute the filter is accepted but not enforced (a warning on the
// route): gRPC has its own message-size limits at the client and the server.
//
// A body of declared length (Content-Length, or an HTTP/2 content-length, which the server
// enforces) is judged before anything is read: over the limit, 413 at once, and nothing goes
// upstream. A body of unknown length (chunked HTTP/1.1, HTTP/2 without content-length) is
// counted while the engine forwards it: the filter replaces r.Body with a reader that returns
// core.ErrBodyTooLarge past the limit, having handed on at most the limit. The engine then
// answers 413 if the response has not started, which is the usual case, and drops the upstream
// exchange either way, so the upstream never receives a rejected body whole (core.StatusError).
package sizelimit

import (
	"io"
	"net/http"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*RequestSizeLimit)(nil))
}

var (
	_ core.ExtensionKind     = (*RequestSizeLimit)(nil)
	_ core.HTTPRequestFilter = (*RequestSizeLimit)(nil)
	_ core.Provisioner       = (*RequestSizeLimit)(nil)
	_ core.ConfigWarner      = (*RequestSizeLimit)(nil)
)

// API is the resource behind this module's ExtensionRefs. A reference to a RequestSizeLimit that
// does not exist fails open, as Coxswain's filter kinds do. On a GRPCRoute it is accepted and not
// enforced.
var API = core.ExtensionAPI{
	Group:    "gateway.coxswain-labs.dev",
	Kind:     "RequestSizeLimit",
	Version:  "v1alpha1",
	Resource: "requestsizelimits",
	FailOpen: true,
}

// TooLargeMessage is the body of a refused request.
const TooLargeMessage = "request body too large"

// RequestSizeLimit is the module.
type RequestSizeLimit struct {
	Config

	max int64 // -1: the size did not parse, the filter lets everything through
}

// CoxswainModule implements core.Module.
func (*RequestSizeLimit) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(RequestSizeLimit) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*RequestSizeLimit) ExtensionAPI() core.ExtensionAPI { return API }

// ExtensionRouteKinds implements core.ExtensionRouteKinds.
func (*RequestSizeLimit) ExtensionRouteKinds() (supported, ignored []string) {
	return []string{"HTTPRoute", "Ingress"}, []string{"GRPCRoute"}
}

// Provision parses the size. One that does not parse fails open, with a WARN here and on the
// route (ConfigWarnings): a limit is protection, not routing, and a typo must not take a route
// down.
func (f *RequestSizeLimit) Provision(bc *core.BuildContext) error {
	n, err := ParseSize(f.MaxSize)
	if err != nil {
		f.max = -1
		if bc != nil && bc.Log != nil {
			bc.Log.Warn("RequestSizeLimit not enforced: its maxSize does not parse", zap.Error(err))
		}
		return nil
	}
	f.max = n
	return nil
}

// ConfigWarnings implements core.ConfigWarner: a size that does not parse.
func (f *RequestSizeLimit) ConfigWarnings() []string {
	if _, err := ParseSize(f.MaxSize); err != nil {
		return []string{"maxSize: " + err.Error() + "; the limit is not enforced"}
	}
	return nil
}

// Limit is the enforced limit in bytes, -1 when none.
func (f *RequestSizeLimit) Limit() int64 { return f.max }

// FilterRequest refuses a declared length over the limit at once and counts a body of unknown
// length as it is read. A request without a body, or with a declared length within the limit,
// passes untouched and costs no allocation; counting one of unknown length costs one.
func (f *RequestSizeLimit) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	if f.max < 0 || r.Body == nil || r.Body == http.NoBody {
		return true
	}
	switch {
	case r.ContentLength > f.max:
		core.Deny(w, r, http.StatusRequestEntityTooLarge, core.GRPCResourceExhausted, TooLargeMessage)
		return false
	case r.ContentLength >= 0:
		return true // the framing ends the body at its declared length
	}
	r.Body = &limitedBody{rc: r.Body, left: f.max}
	return true
}

// limitedBody hands on at most left bytes of rc and fails with core.ErrBodyTooLarge as soon as
// rc has more. It reads one byte beyond the limit to know, which it never returns. Reads come
// from one goroutine at a time (the forwarder's); Close may come from another and touches no
// field.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
	err  error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		n, b.left, b.err = int(b.left), 0, core.ErrBodyTooLarge
		return n, b.err
	}
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
