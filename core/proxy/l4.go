package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/wrr"
)

// Layer-4 routes. A route's match module says what kind of route it is: a core.HTTPMatcher is an
// HTTP route, a core.StreamRoute a TCP or TLS route, a core.DatagramRoute a UDP route. The table
// build compiles each by its kind, and a listener module states which kind it serves
// (RouteAPIer), so that a snapshot pairing a listener with the wrong kind of route is rejected at
// build time rather than failing per connection.

// RouteAPI is the route interface the routes of a listener module implement.
type RouteAPI uint8

const (
	// RouteAPIHTTP routes implement core.HTTPMatcher (listener.http, listener.https).
	RouteAPIHTTP RouteAPI = iota
	// RouteAPIStream routes implement core.StreamRoute (listener.tcp, listener.tls).
	RouteAPIStream
	// RouteAPIDatagram routes implement core.DatagramRoute (listener.udp).
	RouteAPIDatagram
)

func (a RouteAPI) String() string {
	switch a {
	case RouteAPIStream:
		return "core.StreamRoute"
	case RouteAPIDatagram:
		return "core.DatagramRoute"
	}
	return "core.HTTPMatcher"
}

// RouteAPIer is implemented by listener modules whose routes are not HTTP routes.
type RouteAPIer interface {
	RouteAPI() RouteAPI
}

// PacketListener is implemented by listener modules that serve a UDP socket ("listener.udp").
// It is a StreamListener whose socket is a datagram socket: the engine binds UDP for it and
// passes the socket as ServeContext.Packet; the net.Listener its server's Serve gets yields no
// connections and is closed when the server must stop.
type PacketListener interface {
	StreamListener
	// ServesPackets marks the module as a datagram listener.
	ServesPackets()
}

func routeAPIOf(sl StreamListener) RouteAPI {
	if r, ok := sl.(RouteAPIer); ok {
		return r.RouteAPI()
	}
	return RouteAPIHTTP
}

func networkOf(sl StreamListener) string {
	if _, ok := sl.(PacketListener); ok {
		return "udp"
	}
	return "tcp"
}

func (rt *route) api() RouteAPI {
	switch {
	case rt.stream != nil:
		return RouteAPIStream
	case rt.dgram != nil:
		return RouteAPIDatagram
	}
	return RouteAPIHTTP
}

// each calls f for every entry.
func (ix *hostIndex[T]) each(f func(T)) {
	ix.exact.each(f)
	ix.wild.each(f)
	if ix.hasAny {
		f(ix.any)
	}
}

// l4Route compiles a route whose match module is a StreamRoute or a DatagramRoute; ok is false
// for any other module. Layer-4 routes have no filters: there is no request to filter.
func (b *builder) l4Route(r *irv1.Route, m core.Module) (rt *route, ok bool, err error) {
	rt = &route{name: r.GetName()}
	var want irv1.Cluster_Protocol
	switch m := m.(type) {
	case core.StreamRoute:
		rt.stream, want = m, irv1.Cluster_TCP
	case core.DatagramRoute:
		rt.dgram, want = m, irv1.Cluster_UDP
	default:
		return nil, false, nil
	}
	if len(r.GetFilters()) > 0 {
		return nil, true, errors.New("filters are not supported on layer-4 routes")
	}
	up := &l4Upstream{network: "tcp"}
	if want == irv1.Cluster_UDP {
		up.network = "udp"
	}
	weights := make([]uint32, len(r.GetBackends()))
	for i, be := range r.GetBackends() {
		if len(be.GetFilters()) > 0 {
			return nil, true, fmt.Errorf("backend %d: filters are not supported on layer-4 routes", i)
		}
		weights[i] = be.GetWeight()
		ub := l4Backend{err: errors.New("backend not resolved: " + be.GetError())}
		if name := be.GetCluster(); name != "" {
			cl, ok := b.lookupCluster(name)
			if !ok {
				return nil, true, fmt.Errorf("backend %d: cluster %s is not in the snapshot", i, name)
			}
			if cl.protocol != want {
				return nil, true, fmt.Errorf("backend %d: cluster %s speaks %s, not %s", i, name, cl.protocol, want)
			}
			ub = l4Backend{cluster: cl, dialer: b.p.dialer, tls: cl.conn.tls}
			if cl.conn.connect != b.p.fwd.defaults.connect {
				ub.dialer = cl.conn.dialer() // the cluster's connect timeout
			}
		}
		up.backends = append(up.backends, ub)
	}
	up.sched = wrr.New(weights)
	rt.up = up
	return rt, true, nil
}

// l4Upstream is the compiled backend choice of a layer-4 route.
type l4Upstream struct {
	sched    *wrr.Schedule
	backends []l4Backend
	network  string
	// obs counts the route's failed connects in coxswain_proxy_upstream_errors_total (set by
	// observeStream; nil when request metrics are off).
	obs *routeObs
}

// l4Backend is one weighted backend: a cluster and the dialer of its connect timeout, or the
// error of a reference that did not resolve.
type l4Backend struct {
	cluster *cluster
	dialer  *net.Dialer
	tls     *upstreamTLS // re-encryption to the endpoint (TLSRoute Terminate with a BackendTLSPolicy)
	err     error
}

var _ core.Upstream = (*l4Upstream)(nil)

// Errors Dial reports for connections Gateway API says to reject.
var (
	ErrNoBackend  = errors.New("the route has no backend")
	ErrNoEndpoint = errors.New("no endpoint available")
)

// Dial implements core.Upstream.
func (u *l4Upstream) Dial(ctx context.Context, client net.Addr) (net.Conn, func(), error) {
	i := u.sched.Next()
	if i < 0 {
		return nil, nil, ErrNoBackend
	}
	be := u.backends[i]
	if be.cluster == nil {
		return nil, nil, be.err
	}
	ca, _ := core.AddrPortOf(client)
	ep := be.cluster.balancer.Pick(&core.PickInfo{Client: ca})
	if ep == nil {
		return nil, nil, fmt.Errorf("cluster %s: %w", be.cluster.name, ErrNoEndpoint)
	}
	ep.Active.Add(1)
	var start time.Time
	fb := be.cluster.feedback
	if fb != nil {
		start = time.Now()
	}
	c, err := be.dialer.DialContext(ctx, u.network, ep.HostPort)
	if err == nil && be.tls != nil {
		c, err = be.tls.handshake(ctx, c)
	}
	if fb != nil {
		fb.Done(ep, time.Since(start), err != nil)
	}
	if err != nil {
		ep.Active.Add(-1)
		if o := u.obs; o != nil && ctx.Err() == nil { // not a client or listener that went away
			o.backend(be.cluster).upstreamError(o.series, connectErrorOf(err))
		}
		return nil, nil, fmt.Errorf("cluster %s: %w", be.cluster.name, err)
	}
	return c, func() { ep.Active.Add(-1) }, nil
}

func newUpstreamDialer(l Limits) *net.Dialer {
	return &net.Dialer{Timeout: Positive(l.UpstreamDialTimeout), KeepAlive: 30 * time.Second}
}

// TLSMode is how a TLS listener serves the connections of one server.
type TLSMode uint8

const (
	// TLSNone: plain TCP.
	TLSNone TLSMode = iota
	// TLSPassthrough: the encrypted stream goes to the backend as it came.
	TLSPassthrough
	// TLSTerminate: the listener terminates TLS with the server's certificates.
	TLSTerminate
)

// StreamTarget is the route a stream connection is served by.
type StreamTarget struct {
	Route    core.StreamRoute
	Upstream core.Upstream
	TLS      TLSMode
	// Name is the IR route name, for logs.
	Name  string
	certs *serverCerts
	rt    *route
	ls    *ListenerState
}

// StreamRoute selects the route for a connection whose TLS SNI is serverName ("" for none, and
// for plain TCP): the Server by SNI (exact, then the most specific wildcard, then the catch-all;
// never a less specific Server than the one that matched, which keeps listeners isolated), then
// the first route of the most specific of its virtual hosts that matches. ok is false when
// nothing matches, and the connection must be dropped.
func (ls *ListenerState) StreamRoute(serverName string) (StreamTarget, bool) {
	host := normalizeHost(serverName)
	srv, ok := ls.servers.lookup(host)
	if !ok {
		return StreamTarget{}, false
	}
	for vh, pos, ok := srv.vhosts.next(host, 0); ok; vh, pos, ok = srv.vhosts.next(host, pos) {
		if len(vh.routes) == 0 || vh.routes[0].stream == nil {
			continue
		}
		rt := vh.routes[0]
		t := StreamTarget{Route: rt.stream, Upstream: rt.up, Name: rt.name, rt: rt, ls: ls}
		switch {
		case srv.tls == nil:
		case srv.tls.GetMode() == irv1.TLS_PASSTHROUGH:
			t.TLS = TLSPassthrough
		default:
			t.TLS = TLSTerminate
			t.certs, _ = ls.certs.lookup(host)
		}
		return t, true
	}
	return StreamTarget{}, false
}

// Certificate chooses the certificate a terminating target answers hello with: the first of its
// server's certificates the client supports, else the first.
func (t *StreamTarget) Certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if t.certs == nil || len(t.certs.certs) == 0 {
		return nil, ErrNoCertificate
	}
	for _, c := range t.certs.certs {
		if hello.SupportsCertificate(c) == nil {
			return c, nil
		}
	}
	return t.certs.certs[0], nil
}

// DatagramTarget is the route a UDP listener opens its sessions with.
type DatagramTarget struct {
	Route    core.DatagramRoute
	Upstream core.Upstream
	Name     string
	rt       *route
	ls       *ListenerState
}

// DatagramRoute returns the route of a UDP listener: the first route (the oldest, when several
// attach to one port) of its catch-all server.
func (ls *ListenerState) DatagramRoute() (DatagramTarget, bool) {
	srv, ok := ls.servers.lookup("")
	if !ok {
		return DatagramTarget{}, false
	}
	for vh, pos, ok := srv.vhosts.next("", 0); ok; vh, pos, ok = srv.vhosts.next("", pos) {
		if len(vh.routes) > 0 && vh.routes[0].dgram != nil {
			rt := vh.routes[0]
			return DatagramTarget{Route: rt.dgram, Upstream: rt.up, Name: rt.name, rt: rt, ls: ls}, true
		}
	}
	return DatagramTarget{}, false
}

// Release drops the table reference ServeContext.Acquire took.
func (ls *ListenerState) Release() { ls.table.release() }

// packetSocket adapts a UDP socket to the socket pool, which holds net.Listeners: Accept blocks
// until Close, so the pool's accept loop idles, and the listener module reads the socket itself
// (ServeContext.Packet).
type packetSocket struct {
	pc   *net.UDPConn
	done chan struct{}
	once sync.Once
}

func bindPacket(ctx context.Context, key sockKey) (net.Listener, error) {
	var lc net.ListenConfig
	pc, err := lc.ListenPacket(ctx, "udp", key.hostPort())
	if err != nil {
		return nil, err
	}
	return &packetSocket{pc: pc.(*net.UDPConn), done: make(chan struct{})}, nil
}

func (s *packetSocket) Accept() (net.Conn, error) {
	<-s.done
	return nil, net.ErrClosed
}

func (s *packetSocket) Close() error {
	err := net.ErrClosed
	s.once.Do(func() {
		close(s.done)
		err = s.pc.Close()
	})
	return err
}

func (s *packetSocket) Addr() net.Addr { return s.pc.LocalAddr() }

// packetConn is the UDP socket behind ln, or nil for a stream socket.
func packetConn(ln net.Listener) *net.UDPConn {
	if ps, ok := ln.(*packetSocket); ok {
		return ps.pc
	}
	return nil
}

// StatsReporter is optionally implemented by a listener module's server to expose counters
// (UDP sessions, datagrams dropped by the session cap, ...). The names are stable metric names.
type StatsReporter interface {
	Stats() map[string]int64
}

// ListenerStats returns the counters of every bound listener whose server reports any, by IR
// listener name. A metrics endpoint reads it; it takes the proxy's lock, so it is not for a hot path.
func (p *Proxy) ListenerStats() map[string]map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]map[string]int64{}
	for _, s := range p.sockets {
		var st map[string]int64
		if sv := s.cur.Load(); sv != nil {
			if r, ok := sv.srv.(StatsReporter); ok {
				st = r.Stats()
			}
		}
		if s.key.network != "udp" && s.limits.MaxConnectionsPerListener > 0 {
			if st == nil {
				st = map[string]int64{}
			}
			st["connections_active"] = s.open.Load()
			st["connections_rejected_cap"] = s.capRejected.Load()
		}
		if n := s.proxyRejected.Load(); n > 0 || s.requiresProxyProtocol() {
			if st == nil {
				st = map[string]int64{}
			}
			st["proxy_protocol_rejected"] = n
		}
		if st != nil {
			out[s.name] = st
		}
	}
	return out
}
