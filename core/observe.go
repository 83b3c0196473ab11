package core

import (
	"net"
	"net/http"
	"net/netip"
)

// RequestObserver is implemented by the response writer of a request the proxy observes (its
// metrics and access log line). It is how a filter tells the access log what only the filter
// knows, and how a module that logs traffic of its own about a request (a mirror's copies)
// learns where the request came in. The request's record lives in the writer, not in the
// request's context, so neither direction allocates.
type RequestObserver interface {
	// ObserveClient records the client a filter resolved (filter.http.client_ip): the access
	// log's client_ip. A request's context is replaced further down the chain (WithClientAddr),
	// so the proxy, which logs the request it dispatched, would not see it otherwise.
	ObserveClient(addr netip.AddrPort)
	// ObservedOrigin is the listener (IR name) that took the request and the Gateway of the
	// listener hostname that matched ("" when none did).
	ObservedOrigin() (listener, gateway string)
}

// ObserverOf finds the RequestObserver of the request w answers, through the writers filters
// wrap around it (those with an Unwrap method, as http.ResponseController expects); nil when the
// request is not observed (metrics and access log off) or w is not a proxy's.
func ObserverOf(w http.ResponseWriter) RequestObserver {
	for w != nil {
		if o, ok := w.(RequestObserver); ok {
			return o
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

// WithClientAddr is ContextWithClientAddr for a filter: r with addr as its client for the rest
// of the chain, and addr recorded as the client of the request's access log line.
func WithClientAddr(w http.ResponseWriter, r *http.Request, addr netip.AddrPort) *http.Request {
	if o := ObserverOf(w); o != nil {
		o.ObserveClient(addr)
	}
	return r.WithContext(ContextWithClientAddr(r.Context(), addr))
}

// SocketPeer is the address of the socket r arrived on: its peer's, even when a PROXY protocol
// header named another client (then PeerAddr is that client, and this the load balancer that
// sent the header). The access log's peer_ip. Unmapped; the zero value means unknown.
func SocketPeer(r *http.Request) netip.AddrPort {
	c, _ := downstream(r)
	if ap, ok := SocketPeerOf(c); ok {
		return ap
	}
	return peerAddr(c, r)
}

// ClientAndSocketPeer is ClientAddr and SocketPeer with one look-up of the request's
// connection (the access log wants both for every request).
func ClientAndSocketPeer(r *http.Request) (client, peer netip.AddrPort) {
	client, c := clientAndConn(r)
	if ap, ok := SocketPeerOf(c); ok {
		return client, ap
	}
	return client, peerAddr(c, r)
}

// ConnClientAndSocketPeer is ClientAndSocketPeer, and whether every request of r's connection
// has the same two: its listener resolves no X-Forwarded-For and no filter replaced the client
// in r's context. Then a caller that keeps a value per connection may keep them, and spare its
// later requests the look-up and the conversions of the connection's addresses (the access log
// does, on the HTTP/1.1 fast path).
func ConnClientAndSocketPeer(r *http.Request) (client, peer netip.AddrPort, perConn bool) {
	_, perConn = r.Context().Value(connKey{}).(*peerConn)
	client, peer = ClientAndSocketPeer(r)
	return client, peer, perConn
}

// SocketPeerOf is the peer of the socket under c: through TLS and a PROXY protocol header. False
// when c is nil or has no IP peer.
func SocketPeerOf(c net.Conn) (netip.AddrPort, bool) {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		c = tc.NetConn()
	}
	if s, ok := TCPConnOf(c); ok {
		return AddrPortOf(s.RemoteAddr())
	}
	if c == nil {
		return netip.AddrPort{}, false
	}
	return AddrPortOf(c.RemoteAddr())
}
