package proxy

import (
	"context"
	"net"
	"net/http"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/h2server"
)

// The inbound HTTP/2 servers Limits.HTTP2Server selects.
const (
	// HTTP2Own is the engine's own server (core/proxy/internal/h2server).
	HTTP2Own = "own"
	// HTTP2Stdlib is net/http's.
	HTTP2Stdlib = "stdlib"
)

// newOwnHTTP2 is the own HTTP/2 server of a listener socket, with the socket's limits. Its
// connections' contexts carry what the HTTP/1.1 server's do: the http.ServerContextKey that
// lets handlers abort with http.ErrAbortHandler, and the listener's ConnContext.
func newOwnHTTP2(sc ServeContext) *h2server.Server {
	return h2server.New(h2server.Config{
		Handler:              sc.HTTP,
		MaxConcurrentStreams: uint32(max(sc.Limits.MaxConcurrentStreams, 0)), //nolint:gosec // bounded by the flag
		MaxHeaderListSize:    uint32(max(sc.Limits.MaxHeaderBytes, 0)),       //nolint:gosec // bounded by the flag
		PrefaceTimeout:       Positive(sc.Limits.ReadHeaderTimeout),
		IdleTimeout:          Positive(sc.Limits.IdleTimeout),
		Log:                  sc.Log,
		ConnContext: func(ctx context.Context, nc net.Conn) context.Context {
			ctx = context.WithValue(ctx, http.ServerContextKey, ownServer)
			if sc.ConnContext != nil {
				ctx = sc.ConnContext(ctx, nc)
			}
			return ctx
		},
	})
}

// ownServer is the http.ServerContextKey value of the own servers' connections when net/http's
// HTTP/2 server is not in use; only its presence matters (see NewHTTP1Server).
var ownServer = &http.Server{}

// resetWatcher is the own HTTP/2 server's ResponseWriter: it runs a function when its stream is
// reset or its connection closes (h2server's WatchReset). For the upstream exchange of such a
// stream that replaces a context.AfterFunc on the request's context, whose registration in the
// context, Done channel and removal cost about 5% of the proxy's CPU per HTTP/2 request (pprof
// of B3 h2, h2load -c16 -m1).
type resetWatcher interface {
	WatchReset(r *http.Request, abort func()) (stop func() bool, ok bool)
}

// watchReset arms w's reset watch for r, looking through ResponseWriter wrappers (the
// observation's obsWriter). ok is false when w is not the own HTTP/2 server's or r's context is
// not its stream's own (then a context.AfterFunc is needed).
func watchReset(w http.ResponseWriter, r *http.Request, abort func()) (stop func() bool, ok bool) {
	for {
		switch v := w.(type) {
		case resetWatcher:
			return v.WatchReset(r, abort)
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return nil, false
		}
	}
}
