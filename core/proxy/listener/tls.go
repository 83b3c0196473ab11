package listener

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/listener/internal/clienthello"
)

// TLSModuleID is the TLS listener of TLSRoutes.
const TLSModuleID core.ModuleID = "listener.tls"

func init() {
	core.RegisterModule(&TLS{})
}

// TLS serves TLSRoutes. It reads the ClientHello without answering it, selects the server and
// route by its SNI (exact, then the most specific wildcard, then the catch-all; a name that
// selects nothing is dropped), and then either passes the still-encrypted stream through,
// ClientHello included (a Passthrough server), or terminates TLS with the server's certificate
// and hands the plaintext to the route (a Terminate server). One port may carry both kinds of
// server; SNI keeps them apart. Reading the ClientHello is bounded by TLSHandshakeTimeout, so a
// client that sends half a hello, garbage or nothing costs one goroutine for that long at most.
// Its config is empty.
type TLS struct{}

var (
	_ proxy.StreamListener = (*TLS)(nil)
	_ proxy.RouteAPIer     = (*TLS)(nil)
)

// CoxswainModule implements core.Module.
func (*TLS) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: TLSModuleID, New: func() core.Module { return new(TLS) }}
}

// RouteAPI implements proxy.RouteAPIer.
func (*TLS) RouteAPI() proxy.RouteAPI { return proxy.RouteAPIStream }

// Check implements proxy.StreamListener: every server passes TLS through or terminates it with
// at least one certificate.
func (*TLS) Check(l *irv1.Listener) error {
	return checkTLSServers(l, func(host string, t *irv1.TLS) error {
		if t.GetMode() == irv1.TLS_TERMINATE && len(t.GetCertificates()) == 0 {
			return fmt.Errorf("server %s terminates TLS without a certificate", host)
		}
		return nil
	})
}

// NewServer implements proxy.StreamListener.
func (*TLS) NewServer(sc proxy.ServeContext) proxy.ConnServer {
	t := &tlsServer{sc: sc, timeout: proxy.Positive(sc.Limits.TLSHandshakeTimeout),
		idle: proxy.Positive(sc.Limits.StreamIdleTimeout)}
	// The route was chosen by this connection's SNI before the handshake; its server's
	// certificates answer it (replayConn carries the choice).
	t.terminate = terminateConfig(func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		rc, ok := hello.Conn.(*replayConn)
		if !ok {
			return nil, proxy.ErrNoCertificate
		}
		return rc.target.Certificate(hello)
	})
	t.srv = newStreamServer(sc, t.handle)
	return t.srv
}

type tlsServer struct {
	srv       *streamServer
	sc        proxy.ServeContext
	timeout   time.Duration
	idle      time.Duration
	terminate *tls.Config
}

func (t *tlsServer) handle(ctx context.Context, c net.Conn, ls *proxy.ListenerState) {
	if t.timeout > 0 {
		_ = c.SetReadDeadline(time.Now().Add(t.timeout))
	}
	sni, hello, err := clienthello.Peek(c)
	if err != nil {
		t.srv.drop(c, "no TLS ClientHello", err)
		return
	}
	if !clienthello.ValidServerName(sni) {
		t.srv.drop(c, "invalid SNI", clienthello.ErrBadServerName)
		return
	}
	target, ok := ls.StreamRoute(sni)
	if !ok {
		t.srv.drop(c, "no route for SNI "+quote(sni), nil)
		return
	}
	s := &core.Stream{Conn: c, ServerName: sni, Upstream: target.Upstream, IdleTimeout: t.idle}
	switch target.TLS {
	case proxy.TLSPassthrough:
		s.Prefix = hello
	case proxy.TLSTerminate:
		tc := tls.Server(&replayConn{Conn: c, buf: hello, target: &target}, t.terminate)
		if err := handshake(ctx, tc, t.timeout); err != nil {
			t.srv.drop(c, "TLS handshake failed", err)
			return
		}
		s.Conn = tc
	default:
		t.srv.drop(c, "route "+target.Name+" is on a server without TLS", nil)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	target.Serve(ctx, s)
}
