package core

import (
	"context"
	"net"
	"net/http"
	"net/netip"
)

type connKey struct{}

// ContextWithConn returns ctx carrying the downstream connection c. Listener servers install it
// as their connection context (one value per connection, not per request), so that filters and
// balancers see the client without parsing RemoteAddr on every request.
func ContextWithConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// DownstreamConn returns the connection r arrived on, or nil when r did not come through a
// listener server (a test calling a handler directly).
func DownstreamConn(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}

// ClientAddr is the downstream peer of r as the data plane resolved it: the connection's remote
// address, which a listener that speaks the PROXY protocol reports as the original client. Its
// Addr is unmapped (an IPv4 client on a dual-stack socket is 1.2.3.4, not ::ffff:1.2.3.4). The
// zero value means unknown. It does not allocate for TCP connections.
func ClientAddr(r *http.Request) netip.AddrPort {
	if c := DownstreamConn(r); c != nil {
		switch a := c.RemoteAddr().(type) {
		case *net.TCPAddr:
			ap := a.AddrPort()
			return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		case nil:
		default:
			if ap, err := netip.ParseAddrPort(a.String()); err == nil {
				return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
			}
		}
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// ClientIP is ClientAddr's address: the key of per-client rules (rate limits, IP access lists).
func ClientIP(r *http.Request) netip.Addr { return ClientAddr(r).Addr() }
