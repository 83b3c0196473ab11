package listener

import (
	"crypto/tls"
	"log"
	"net/http"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// newHTTPServer is the http.Server both modules use, with the production limits. WriteTimeout is
// normally off so that streams (SSE, gRPC, downloads) last as long as their routes allow.
func newHTTPServer(sc proxy.ServeContext, protos http.Protocols, tlsCfg *tls.Config) *http.Server {
	return &http.Server{
		Handler:           sc.HTTP,
		ReadHeaderTimeout: proxy.Positive(sc.Limits.ReadHeaderTimeout),
		IdleTimeout:       proxy.Positive(sc.Limits.IdleTimeout),
		WriteTimeout:      proxy.Positive(sc.Limits.WriteTimeout),
		MaxHeaderBytes:    sc.Limits.MaxHeaderBytes,
		Protocols:         &protos,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: sc.Limits.MaxConcurrentStreams},
		TLSConfig:         tlsCfg,
		ConnContext:       sc.ConnContext,
		ErrorLog:          log.New(errorLog(sc.Log), "", 0),
	}
}

// errorLog routes net/http's log lines to zap: handshake and preface failures (scanners, clients
// that hang up) at debug, anything else (panics in handlers, accept errors) at warn.
func errorLog(log *zap.Logger) *zapLogWriter { return &zapLogWriter{log: log} }

type zapLogWriter struct{ log *zap.Logger }

func (w *zapLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	lvl := zapcore.WarnLevel
	if strings.Contains(msg, "TLS handshake error") || strings.Contains(msg, "error reading preface") ||
		strings.Contains(msg, "http2: server: error") {
		lvl = zapcore.DebugLevel
	}
	if ce := w.log.Check(lvl, msg); ce != nil {
		ce.Write()
	}
	return len(p), nil
}
