package proxy

import (
	"context"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Layer-4 observation: a TCPRoute or TLSRoute connection is counted and logged when it ends,
// in coxswain_proxy_stream_connections_total{gateway, route} and
// coxswain_proxy_stream_bytes_total{gateway, route, direction}, a UDPRoute session likewise in
// coxswain_proxy_udp_sessions_total and coxswain_proxy_udp_bytes_total, with series resolved per
// table like the HTTP routes' (reqmetrics.go).

// streamObs are one layer-4 route's series: its connections (or UDP sessions) and their bytes.
type streamObs struct {
	gateway, route string
	conns          prometheus.Counter
	in, out        prometheus.Counter // from the client, to the client
}

// Serve runs the target's route on s (core.StreamRoute.ServeStream) and records the connection
// once it has ended. Listener modules call it instead of ServeStream.
func (t *StreamTarget) Serve(ctx context.Context, s *core.Stream) {
	start := time.Now()
	t.Route.ServeStream(ctx, s)
	if t.rt == nil || t.ls == nil || t.ls.obs == nil {
		return
	}
	if o := t.rt.l4obs; o != nil {
		o.conns.Inc()
		o.in.Add(float64(s.BytesFromClient))
		o.out.Add(float64(s.BytesToClient))
	}
	l := t.ls.obs.log
	if !l.Sampled() {
		return
	}
	r := accesslog.Record{Kind: accesslog.KindConnection, Time: start, Listener: t.ls.obs.listener,
		Gateway: t.rt.gateway, Route: t.rt.name, Rule: t.rt.rule, Upstream: s.UpstreamAddr, TLSSNI: s.ServerName,
		BytesIn: s.BytesFromClient, BytesOut: s.BytesToClient, Duration: time.Since(start)}
	if ap, ok := core.AddrPortOf(s.Conn.RemoteAddr()); ok {
		r.ClientIP = ap.Addr()
	}
	if ap, ok := core.SocketPeerOf(s.Conn); ok {
		r.PeerIP = ap.Addr()
	}
	l.Log(&r)
}

// SessionEnd is what a datagram listener knows of a UDP session that has ended.
type SessionEnd struct {
	Client netip.AddrPort
	// Start is when the session was opened.
	Start time.Time
	// BytesFromClient and BytesToClient are the datagram payload bytes each way.
	BytesFromClient, BytesToClient int64
	// Session is the route's session (its upstream, when it implements core.SessionUpstream).
	Session core.Session
}

// Ended records a UDP session of the target's route that has ended: it is counted in
// coxswain_proxy_udp_sessions_total{gateway, route} and coxswain_proxy_udp_bytes_total{gateway,
// route, direction}, and logged. Listener modules call it once per session, before releasing the
// table they opened it with.
func (t *DatagramTarget) Ended(e SessionEnd) {
	if t.rt == nil || t.ls == nil || t.ls.obs == nil {
		return
	}
	if o := t.rt.l4obs; o != nil {
		o.conns.Inc()
		o.in.Add(float64(e.BytesFromClient))
		o.out.Add(float64(e.BytesToClient))
	}
	l := t.ls.obs.log
	if !l.Sampled() {
		return
	}
	r := accesslog.Record{Kind: accesslog.KindSession, Time: e.Start, Listener: t.ls.obs.listener,
		Gateway: t.rt.gateway, Route: t.rt.name, Rule: t.rt.rule, BytesIn: e.BytesFromClient,
		BytesOut: e.BytesToClient, Duration: time.Since(e.Start), ClientIP: e.Client.Addr(), PeerIP: e.Client.Addr()}
	if su, ok := e.Session.(core.SessionUpstream); ok {
		r.Upstream = su.UpstreamAddr()
	}
	l.Log(&r)
}

// observeStream resolves the series of a layer-4 route being built.
func (b *builder) observeStream(rt *route, r *irv1.Route) error {
	rt.gateway, rt.rule = b.gateway, r.GetRuleName()
	if !b.p.reqMetrics || (rt.stream == nil && rt.dgram == nil) {
		return nil
	}
	s, err := b.p.requestSeriesOf()
	if err != nil {
		return err
	}
	held := b.holdSeries(s)
	rt.l4obs = s.streamObsOf(held, b.gateway, routeObject(rt.name), rt.dgram != nil)
	if up := rt.up; up != nil {
		// Failed connects, in the HTTP routes' upstream error series: same labels, made by the
		// first failure (lazyseries.go).
		clusters := make([]*cluster, 0, len(up.backends))
		for _, be := range up.backends {
			clusters = append(clusters, be.cluster)
		}
		up.obs = s.routeObsOf(held, b.gateway, routeObject(rt.name), clusters)
	}
	return nil
}
