package core

import (
	"context"
	"net"
	"net/http"
	"net/netip"
)

type connKey struct{}

// detectingConn is the connection value of a listener that resolves its requests' client IP from
// X-Forwarded-For (ContextWithClientIPDetection). A listener without that stores the net.Conn
// itself, so that the common case pays nothing for the feature.
type detectingConn struct {
	conn    net.Conn
	xffHops uint32
}

// peerConn is the connection value of a listener without client IP detection: the connection and
// its peer's address, converted once per connection rather than on every ClientAddr.
type peerConn struct {
	conn net.Conn
	addr netip.AddrPort // the zero value when the peer is not an IP address
}

// resolvedClient is the connection value of a request whose client a route's filter resolved
// itself (ContextWithClientAddr), overriding the listener's detection.
type resolvedClient struct {
	conn net.Conn
	addr netip.AddrPort
}

// ContextWithClientAddr returns ctx (a request's, under a listener server) with addr as the
// client every later ClientAddr sees: for a filter that resolves the client its own way (an
// Ingress's trust-forwarded-for annotation, modules/filters/clientip). The connection stays
// what DownstreamConn and PeerAddr report.
func ContextWithClientAddr(ctx context.Context, addr netip.AddrPort) context.Context {
	var c net.Conn
	switch v := ctx.Value(connKey{}).(type) {
	case *peerConn:
		c = v.conn
	case *detectingConn:
		c = v.conn
	case *resolvedClient:
		c = v.conn
	}
	return context.WithValue(ctx, connKey{}, &resolvedClient{conn: c, addr: addr})
}

// ContextWithConn returns ctx carrying the downstream connection c. Listener servers install it
// as their connection context (one value per connection, not per request), so that filters and
// balancers see the client without parsing RemoteAddr on every request.
func ContextWithConn(ctx context.Context, c net.Conn) context.Context {
	if c == nil {
		return context.WithValue(ctx, connKey{}, c)
	}
	addr, _ := AddrPortOf(c.RemoteAddr())
	return context.WithValue(ctx, connKey{}, &peerConn{conn: c, addr: addr})
}

// ContextWithClientIPDetection is ContextWithConn for a listener whose requests' client is the
// address xffHops entries from the right of X-Forwarded-For (see ClientAddr); 0 is
// ContextWithConn.
func ContextWithClientIPDetection(ctx context.Context, c net.Conn, xffHops uint32) context.Context {
	if xffHops == 0 {
		return ContextWithConn(ctx, c)
	}
	return context.WithValue(ctx, connKey{}, &detectingConn{conn: c, xffHops: xffHops})
}

// downstream returns the connection r arrived on and its listener's trusted X-Forwarded-For hops.
func downstream(r *http.Request) (net.Conn, uint32) {
	switch v := r.Context().Value(connKey{}).(type) {
	case *peerConn:
		return v.conn, 0
	case *detectingConn:
		return v.conn, v.xffHops
	case *resolvedClient:
		return v.conn, 0
	}
	return nil, 0
}

// DownstreamConn returns the connection r arrived on, or nil when r did not come through a
// listener server (a test calling a handler directly).
func DownstreamConn(r *http.Request) net.Conn {
	c, _ := downstream(r)
	return c
}

// ClientAddr is the client of r as the data plane resolved it, the one address every per-client
// decision uses (IP access lists, rate limits, hash:source-ip, external authorization, the
// access log). It is the connection's peer (PeerAddr), unless the listener trusts N > 0 hops of
// X-Forwarded-For (ClientTrafficPolicy clientIPDetection): then it is the address N entries from
// the right of that header, port 0, or the peer when the header has fewer entries or that entry
// is not an IP address; or what a route's filter resolved (ContextWithClientAddr). Its Addr is
// unmapped (an IPv4 client on a dual-stack socket is 1.2.3.4, not ::ffff:1.2.3.4). The zero
// value means unknown. It does not allocate.
func ClientAddr(r *http.Request) netip.AddrPort {
	a, _ := clientAndConn(r)
	return a
}

// clientAndConn is ClientAddr and the connection r arrived on (nil when unknown).
func clientAndConn(r *http.Request) (netip.AddrPort, net.Conn) {
	switch v := r.Context().Value(connKey{}).(type) {
	case *peerConn:
		if v.addr.IsValid() {
			return v.addr, v.conn
		}
		return peerAddr(v.conn, r), v.conn
	case *detectingConn:
		if ip, ok := ForwardedClient(r.Header["X-Forwarded-For"], v.xffHops); ok {
			return netip.AddrPortFrom(ip, 0), v.conn
		}
		return peerAddr(v.conn, r), v.conn
	case *resolvedClient:
		return v.addr, v.conn
	}
	return peerAddr(nil, r), nil
}

// ClientIP is ClientAddr's address: the key of per-client rules (rate limits, IP access lists).
func ClientIP(r *http.Request) netip.Addr { return ClientAddr(r).Addr() }

// PeerAddr is the downstream peer of r: the connection's remote address, which a listener that
// speaks the PROXY protocol reports as the header's source, never X-Forwarded-For. It is what
// the forwarders append to X-Forwarded-For. Unmapped; the zero value means unknown.
func PeerAddr(r *http.Request) netip.AddrPort {
	if v, ok := r.Context().Value(connKey{}).(*peerConn); ok && v.addr.IsValid() {
		return v.addr
	}
	c, _ := downstream(r)
	return peerAddr(c, r)
}

func peerAddr(c net.Conn, r *http.Request) netip.AddrPort {
	if c != nil {
		if ap, ok := AddrPortOf(c.RemoteAddr()); ok {
			return ap
		}
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// AddrPortOf is a socket address as an unmapped netip.AddrPort; false when a is nil or not an IP
// address. It does not allocate for TCP and UDP addresses.
func AddrPortOf(a net.Addr) (netip.AddrPort, bool) {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	case nil:
		return netip.AddrPort{}, false
	default:
		var err error
		if ap, err = netip.ParseAddrPort(a.String()); err != nil {
			return netip.AddrPort{}, false
		}
	}
	if !ap.Addr().IsValid() {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// ForwardedClient returns the address n entries from the right of the X-Forwarded-For field
// lines (one comma-separated list, RFC 9110 §5.3), unmapped; false when there are fewer than n
// entries or that one is not an IP address (with or without a port). It does not allocate.
//
// This is Envoy's xff_num_trusted_hops with use_remote_address, which Envoy Gateway's
// ClientTrafficPolicy clientIPDetection.xForwardedFor.numTrustedHops configures: "the trusted
// client address is the Nth address from the right end of XFF; if XFF contains fewer than N
// addresses, Envoy falls back to using the immediate downstream connection's source address"
// (Envoy docs, config_http_conn_man_headers_x-forwarded-for; the XFF original IP detection
// extension, extensions.http.original_ip_detection.xff.v3). Each of the N trusted proxies in
// front of the gateway appended its own peer, so with N = 1 and "XFF: a, b" the client is b,
// the peer of the one proxy we trust; a is whatever b claimed.
func ForwardedClient(lines []string, n uint32) (netip.Addr, bool) {
	if n == 0 {
		return netip.Addr{}, false
	}
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for {
			j := lastComma(line)
			entry := line[j+1:]
			if n--; n == 0 {
				return parseForwarded(trimOWS(entry))
			}
			if j < 0 {
				break
			}
			line = line[:j]
		}
	}
	return netip.Addr{}, false
}

func lastComma(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ',' {
			return i
		}
	}
	return -1
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseForwarded reads one X-Forwarded-For entry: an IP address, or one with a port
// ("1.2.3.4:5", "[::1]:5"), as some proxies write.
func parseForwarded(s string) (netip.Addr, bool) {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
