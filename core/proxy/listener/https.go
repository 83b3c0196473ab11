package listener

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/listener/internal/clienthello"
)

// HTTPSModuleID is the TLS-terminating HTTP listener.
const HTTPSModuleID core.ModuleID = "listener.https"

func init() {
	core.RegisterModule(&HTTPS{})
}

// HTTPS terminates TLS (1.2 and later) and serves HTTP/2 or HTTP/1.1 by ALPN. The certificate is
// chosen per handshake from the socket's current table by SNI, so a snapshot that changes a Secret
// reaches new handshakes at once while established connections keep theirs. Its config is empty.
type HTTPS struct{}

var (
	_ core.Module          = (*HTTPS)(nil)
	_ proxy.StreamListener = (*HTTPS)(nil)
)

// CoxswainModule implements core.Module.
func (*HTTPS) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: HTTPSModuleID, New: func() core.Module { return new(HTTPS) }}
}

// Check implements proxy.StreamListener: every server terminates TLS with at least one certificate.
func (*HTTPS) Check(l *irv1.Listener) error {
	for _, s := range l.GetServers() {
		// A server without certificates is one waiting for its ACME certificate: it answers
		// only TLS-ALPN-01 validations, every other handshake fails, and so it has no routes.
		if s.GetTls() != nil && len(s.GetTls().GetCertificates()) == 0 && len(s.GetVirtualHosts()) > 0 {
			return fmt.Errorf("server %s has routes but no certificate", quote(s.GetHostname()))
		}
	}
	return checkTLSServers(l, func(host string, t *irv1.TLS) error {
		if t.GetMode() != irv1.TLS_TERMINATE {
			return fmt.Errorf("server %s: TLS mode %s needs listener.tls", host, t.GetMode())
		}
		return nil
	})
}

// NewServer implements proxy.StreamListener.
func (*HTTPS) NewServer(sc proxy.ServeContext) proxy.ConnServer {
	cfg := terminateConfig(func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		ls := sc.State()
		if ls == nil {
			return nil, proxy.ErrNoCertificate
		}
		return ls.Certificate(hello)
	})
	cfg.NextProtos = []string{"h2", "http/1.1"}
	// A Server that validates client certificates answers its handshakes with a config of its own.
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if !clienthello.ValidServerName(hello.ServerName) {
			return nil, clienthello.ErrBadServerName
		}
		if ls := sc.State(); ls != nil {
			if acme := ls.ACMEConfigForClient(hello); acme != nil {
				return acme, nil
			}
			return ls.ConfigForClient(hello)
		}
		return nil, nil
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	srv := newHTTPServer(sc, p, cfg)
	hsLog := sc.Log
	timeout := proxy.Positive(sc.Limits.TLSHandshakeTimeout)
	// HTTP/1.1 over TLS goes through the engine's own server; connections that negotiated h2 go to
	// the engine's own HTTP/2 server, or to net/http's with --proxy-http2-server=stdlib.
	w := &wrapped{ConnServer: proxy.NewHTTP1Server(sc, srv)}
	w.wrap = func(l net.Listener) net.Listener {
		return newHandshakeListener(l, cfg, timeout, hsLog, &w.handshakeErrors)
	}
	return w
}

// wrapped serves the connections of a wrapping listener (the TLS handshakes).
type wrapped struct {
	proxy.ConnServer
	wrap            func(net.Listener) net.Listener
	handshakeErrors atomic.Int64
}

func (w *wrapped) Serve(l net.Listener) error { return w.ConnServer.Serve(w.wrap(l)) }

// Stats adds the failed TLS handshakes to the HTTP server's counters (proxy.StatsReporter).
func (w *wrapped) Stats() map[string]int64 {
	st := map[string]int64{}
	if r, ok := w.ConnServer.(proxy.StatsReporter); ok {
		st = r.Stats()
	}
	st["tls_handshake_errors"] = w.handshakeErrors.Load()
	return st
}

// handshakeListener completes each TLS handshake in its own goroutine, bounded by the handshake
// timeout, before the HTTP server sees the connection: a slow or silent client costs one goroutine
// and never a slot in the server.
type handshakeListener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration
	log     *zap.Logger
	failed  *atomic.Int64
	ch      chan net.Conn
	done    chan struct{}
	once    sync.Once
}

func newHandshakeListener(inner net.Listener, cfg *tls.Config, timeout time.Duration, log *zap.Logger, failed *atomic.Int64) *handshakeListener {
	l := &handshakeListener{inner: inner, cfg: cfg, timeout: timeout, log: log, failed: failed,
		ch: make(chan net.Conn), done: make(chan struct{})}
	go l.run()
	return l
}

func (l *handshakeListener) run() {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			_ = l.Close()
			return
		}
		go l.handshake(c)
	}
}

func (l *handshakeListener) handshake(c net.Conn) {
	tc := tls.Server(c, l.cfg)
	if err := handshake(context.Background(), tc, l.timeout); err != nil {
		l.failed.Add(1)
		l.log.Debug("TLS handshake failed", zap.Stringer("remote", c.RemoteAddr()), zap.Error(err))
		_ = c.Close()
		return
	}
	if tc.ConnectionState().NegotiatedProtocol == proxy.ACMETLSALPNProto {
		_ = tc.Close() // a TLS-ALPN-01 validation is over with the handshake (RFC 8737)
		return
	}
	select {
	case l.ch <- tc:
	case <-l.done:
		_ = tc.Close()
	}
}

func (l *handshakeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handshakeListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		_ = l.inner.Close()
	})
	return nil
}

func (l *handshakeListener) Addr() net.Addr { return l.inner.Addr() }
