package proxy

import (
	"net/http"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1server"
)

// NewHTTP1Server returns the engine's own HTTP/1.1 server (core/proxy/internal/h1server) for a
// listener socket, which a listener module may use instead of net/http's. Every request goes to
// sc.HTTP, which routes it on the socket's current table. HTTP/2 goes to the engine's own HTTP/2
// server when sc.Limits.HTTP2Server is HTTP2Own and h2 is not nil (h2own.go), else to h2 (which
// may be nil): cleartext connections that open with the HTTP/2 preface (prior knowledge; h2 must
// serve unencrypted HTTP/2), and TLS connections that negotiated "h2" by ALPN.
//
// Each connection's response writer carries a reqRecord (observe.go), so that observing a
// request allocates nothing.
func NewHTTP1Server(sc ServeContext, h2 *http.Server) ConnServer {
	cfg := h1server.Config{
		Handler:            sc.HTTP,
		MaxHeaderBytes:     sc.Limits.MaxHeaderBytes,
		MaxHeaderFields:    sc.Limits.MaxHeaderFields,
		ReadHeaderTimeout:  Positive(sc.Limits.ReadHeaderTimeout),
		IdleTimeout:        Positive(sc.Limits.IdleTimeout),
		WriteTimeout:       Positive(sc.Limits.WriteTimeout),
		RequestBodyTimeout: Positive(sc.Limits.RequestBodyTimeout),
		Log:                sc.Log,
		ConnContext:        sc.ConnContext,
		NewScratch:         func() any { return new(reqRecord) },
		H2Stdlib:           h2,
	}
	if cfg.MaxHeaderBytes <= 0 {
		cfg.MaxHeaderBytes = DefaultLimits.MaxHeaderBytes
	}
	if cfg.MaxHeaderFields <= 0 {
		cfg.MaxHeaderFields = DefaultLimits.MaxHeaderFields
	}
	if h2 != nil && sc.Limits.HTTP2Server == HTTP2Own {
		cfg.H2, cfg.H2Stdlib = newOwnHTTP2(sc), nil
	}
	return h1server.New(cfg)
}

var (
	_ ConnServer    = (*h1server.Server)(nil)
	_ StatsReporter = (*h1server.Server)(nil)
)
