package core

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// The route-kind interfaces of the layer-4 listeners. A TCP or TLS listener selects a route per
// connection (by port, or by the TLS ClientHello's SNI) and hands the connection to the route's
// StreamRoute; a UDP listener keeps one session per client address and opens it through the
// route's DatagramRoute. Choosing the backend stays the engine's job (weights, the cluster's
// balancer, weighted rejection for unresolved backends): a route kind only moves the bytes.

// StreamRoute is implemented by route-kind modules of byte-stream listeners ("route.tcp",
// "route.tls"). The engine loads one instance per IR Route; ServeStream runs on the
// connection's own goroutine, once per downstream connection, and owns s.Conn until it returns
// (it must close it).
type StreamRoute interface {
	ServeStream(ctx context.Context, s *Stream)
}

// Stream is one downstream connection a StreamRoute serves.
type Stream struct {
	// Conn is the downstream connection: a *net.TCPConn for TCP and TLS passthrough (so that a
	// copy to a TCP upstream can splice; TCPConnOf unwraps the one of a PROXY protocol
	// listener, whose RemoteAddr is the header's client), a *tls.Conn when the listener
	// terminated TLS.
	Conn net.Conn
	// Prefix holds bytes the listener already read from Conn (the ClientHello a passthrough
	// listener peeked at); they must reach the upstream before anything else.
	Prefix []byte
	// ServerName is the TLS SNI the route was selected by; "" for plain TCP.
	ServerName string
	// Upstream connects to one of the route's backends.
	Upstream Upstream
	// IdleTimeout ends the stream after this long without a byte in either direction; 0 means
	// none.
	IdleTimeout time.Duration

	// Set by the route before ServeStream returns, for the proxy's metrics and access log: the
	// bytes copied each way (the prefix counts as the client's) and the upstream endpoint
	// ("address:port", "" when none was reached).
	BytesFromClient, BytesToClient int64
	UpstreamAddr                   string
}

// Upstream is the engine's compiled backend choice for one layer-4 route.
type Upstream interface {
	// Dial chooses a backend by weight and an endpoint of it by the cluster's balancer, and
	// connects to it (TCP or UDP, as the cluster says) within the proxy's connect timeout. It
	// fails when the chosen backend's reference did not resolve or its cluster has no endpoint:
	// Gateway API asks for such a share of connections to be rejected, not moved to another
	// backend. done must be called once the connection is closed; it keeps the endpoint's
	// Active count right for balancers.
	Dial(ctx context.Context, client net.Addr) (c net.Conn, done func(), err error)
}

// DatagramRoute is implemented by route-kind modules of datagram listeners ("route.udp"). A
// datagram listener keeps one session per client address and calls OpenSession on the route
// that serves a client's first datagram; the session is then pinned to the upstream it opened
// until the listener evicts it for being idle.
type DatagramRoute interface {
	OpenSession(ctx context.Context, s *DatagramSession) (Session, error)
}

// DatagramSession describes a session being opened.
type DatagramSession struct {
	Client netip.AddrPort
	// Upstream connects to one of the route's backends.
	Upstream Upstream
	// Reply sends a datagram to the client from the listener's socket. It is safe for concurrent
	// use; b may be reused once Reply returns.
	Reply func(b []byte) error
}

// Session is an open datagram session.
type Session interface {
	// Send forwards one datagram from the client to the session's upstream; b may be reused once
	// Send returns. It is called from the listener's read loop, one call at a time.
	Send(b []byte) error
	// Close ends the session and releases its upstream; replies stop.
	Close() error
}

// SessionUpstream is implemented by Sessions that know the endpoint they send to, for the
// access log's session lines.
type SessionUpstream interface {
	// UpstreamAddr is the endpoint, "address:port".
	UpstreamAddr() string
}

// TCPConnOf returns the TCP socket of a downstream connection: c itself, or the socket under a
// connection whose client came in a PROXY protocol header (its RemoteAddr differs, every byte
// still comes from the socket); false for anything else (TLS). Copying to or from the socket
// directly (splice) is then correct.
func TCPConnOf(c net.Conn) (*net.TCPConn, bool) {
	switch c := c.(type) {
	case *net.TCPConn:
		return c, true
	case interface{ NetTCPConn() *net.TCPConn }:
		return c.NetTCPConn(), true
	}
	return nil, false
}
