package listener

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

func init() {
	core.RegisterModule(&HTTP3{})
}

// HTTP3 serves HTTP/3 (quic-go's http3 server) on the UDP socket the engine binds beside an
// HTTPS listener that asks for it (proxy.HTTP3ModuleID). It has no IR listener of its own: the
// engine loads it for the HTTPS listener and hands it that listener's compiled state, so the
// certificate of each QUIC handshake is chosen by SNI from the socket's current table, as
// listener.https chooses it, and every request goes through the same handler (routing, filters,
// metrics, access log) on the table current when it arrives. QUIC connections belong to the
// socket, which survives snapshots that keep the listener's HTTP/3.
//
// 0-RTT: quic-go can take requests in early data on resumed connections, which an attacker can
// replay. The proxy accepts early data only while the listener's IR allows it, and even then a
// request that is not GET, HEAD or OPTIONS waits for the handshake to complete before it is
// served (a replayed handshake never completes), while a safe one is served at once and carries
// "Early-Data: 1" upstream (RFC 8470), so that the backend can answer 425 Too Early.
type HTTP3 struct{}

var (
	_ proxy.PacketListener = (*HTTP3)(nil)
)

// CoxswainModule implements core.Module.
func (*HTTP3) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: proxy.HTTP3ModuleID, New: func() core.Module { return new(HTTP3) }}
}

// ServesPackets implements proxy.PacketListener.
func (*HTTP3) ServesPackets() {}

// Check implements proxy.StreamListener: what listener.https checks, since it serves the same
// IR listener.
func (*HTTP3) Check(l *irv1.Listener) error { return (&HTTPS{}).Check(l) }

// NewServer implements proxy.StreamListener.
func (*HTTP3) NewServer(sc proxy.ServeContext) proxy.ConnServer {
	s := &h3Server{sc: sc}
	cfg := terminateConfig(func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		ls := sc.State()
		if ls == nil {
			return nil, proxy.ErrNoCertificate
		}
		return ls.Certificate(hello)
	})
	cfg.MinVersion = tls.VersionTLS13 // QUIC is TLS 1.3 only
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		ls := sc.State()
		if ls == nil {
			return nil, nil
		}
		c, err := ls.ConfigForClient(hello)
		if c == nil || err != nil {
			return c, err
		}
		// A Server that checks client certificates never takes early data.
		c = c.Clone()
		c.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
			return noEarlyData(c.DecryptTicket(identity, cs))
		}
		return c, nil
	}
	// Tickets always allow early data (quic.Config.Allow0RTT) so that the listener's setting can
	// change without a new server; whether a resumption may use it is decided here, at each
	// resumption, by the table current then.
	cfg.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := cfg.DecryptTicket(identity, cs)
		if ls := sc.State(); ls != nil && ls.Allow0RTT() {
			return ss, err
		}
		return noEarlyData(ss, err)
	}
	limits := sc.Limits
	s.srv = &http3.Server{
		Handler:        http.HandlerFunc(s.serveHTTP),
		TLSConfig:      cfg,
		MaxHeaderBytes: limits.MaxHeaderBytes,
		IdleTimeout:    proxy.Positive(limits.IdleTimeout),
		QUICConfig: &quic.Config{
			Allow0RTT:            true,
			HandshakeIdleTimeout: proxy.Positive(limits.TLSHandshakeTimeout),
			MaxIdleTimeout:       proxy.Positive(limits.IdleTimeout),
			MaxIncomingStreams:   int64(limits.MaxConcurrentStreams),
		},
		ConnContext: s.connContext,
	}
	return s
}

func noEarlyData(ss *tls.SessionState, err error) (*tls.SessionState, error) {
	if ss != nil {
		ss.EarlyData = false
	}
	return ss, err
}

// h3Server is the http3.Server of one UDP socket.
type h3Server struct {
	sc    proxy.ServeContext
	srv   *http3.Server
	conns atomic.Int64 // QUIC connections accepted
}

var (
	_ proxy.ConnServer    = (*h3Server)(nil)
	_ proxy.StatsReporter = (*h3Server)(nil)
)

type quicConnKey struct{}

// connContext gives a QUIC connection the engine's connection context (client address, client
// IP detection) through a net.Conn view of it, and keeps the connection for the early-data check.
func (s *h3Server) connContext(ctx context.Context, c *quic.Conn) context.Context {
	s.conns.Add(1)
	ctx = context.WithValue(ctx, quicConnKey{}, c)
	return s.sc.ConnContext(ctx, quicNetConn{c})
}

// serveHTTP holds a request that arrived in early data and is not safe to replay until the
// handshake has completed, then hands it to the engine.
func (s *h3Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if c, ok := r.Context().Value(quicConnKey{}).(*quic.Conn); ok && !handshakeDone(c) && c.ConnectionState().Used0RTT {
		if !safeMethod(r.Method) {
			select {
			case <-c.HandshakeComplete():
			case <-r.Context().Done():
				return
			}
		} else {
			r.Header.Set("Early-Data", "1")
		}
	}
	s.sc.HTTP.ServeHTTP(w, r)
}

func handshakeDone(c *quic.Conn) bool {
	select {
	case <-c.HandshakeComplete():
		return true
	default:
		return false
	}
}

// safeMethod reports the methods RFC 8470 lets a server answer from early data.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// Serve implements proxy.ConnServer. l yields no connections: the engine stops the server with
// Shutdown or Close.
func (s *h3Server) Serve(net.Listener) error {
	if s.sc.Packet == nil {
		return errors.New("listener.http3 needs a UDP socket")
	}
	_ = s.sc.Packet.SetReadBuffer(socketBuffer)
	_ = s.sc.Packet.SetWriteBuffer(socketBuffer)
	err := s.srv.Serve(s.sc.Packet) // does not close the socket, which belongs to the engine
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, quic.ErrServerClosed) {
		return net.ErrClosed
	}
	return err
}

// Shutdown implements proxy.ConnServer by closing at once. QUIC connections live on the socket,
// not beside it as TCP ones do: the engine shuts a server down after closing its socket (HTTP/3
// turned off, the proxy stopping), when no connection can be served any more, or when another
// server takes the socket over (a UDP listener), which must not have its datagrams read by a
// draining QUIC transport. Either way waiting would only hold the drain until its timeout.
func (s *h3Server) Shutdown(context.Context) error { return s.srv.Close() }

// Close implements proxy.ConnServer.
func (s *h3Server) Close() error { return s.srv.Close() }

// Stats implements proxy.StatsReporter.
func (s *h3Server) Stats() map[string]int64 {
	return map[string]int64{"quic_connections_accepted": s.conns.Load()}
}

// quicNetConn is the net.Conn view of a QUIC connection that the engine's connection context
// holds: its addresses are what per-client decisions read. It carries no bytes.
type quicNetConn struct{ c *quic.Conn }

var errNotAStream = errors.New("a QUIC connection is not a byte stream")

func (q quicNetConn) Read([]byte) (int, error)         { return 0, errNotAStream }
func (q quicNetConn) Write([]byte) (int, error)        { return 0, errNotAStream }
func (q quicNetConn) Close() error                     { return q.c.CloseWithError(0, "") }
func (q quicNetConn) LocalAddr() net.Addr              { return q.c.LocalAddr() }
func (q quicNetConn) RemoteAddr() net.Addr             { return q.c.RemoteAddr() }
func (q quicNetConn) SetDeadline(time.Time) error      { return nil }
func (q quicNetConn) SetReadDeadline(time.Time) error  { return nil }
func (q quicNetConn) SetWriteDeadline(time.Time) error { return nil }

var _ net.Conn = quicNetConn{}
