package proxy

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

// Layer-4 observation: a TCPRoute or TLSRoute connection is counted and logged when it ends,
// in coxswain_proxy_stream_connections_total{gateway, route} and
// coxswain_proxy_stream_bytes_total{gateway, route, direction}, with series resolved per table
// like the HTTP routes' (reqmetrics.go).

// streamObs are one layer-4 route's series.
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
	fs := l.Get()
	fs.Add(zap.String("listener", t.ls.obs.listener))
	if o := t.rt.l4obs; o != nil && o.gateway != "" {
		fs.Add(zap.String("gateway", o.gateway))
	}
	fs.Add(zap.String("route", t.rt.name))
	if s.UpstreamAddr != "" {
		fs.Add(zap.String("upstream", s.UpstreamAddr))
	}
	if s.ServerName != "" {
		fs.Add(zap.String("tls_sni", s.ServerName))
	}
	fs.Add(zap.Int64("bytes_in", s.BytesFromClient))
	fs.Add(zap.Int64("bytes_out", s.BytesToClient))
	fs.Add(zap.Duration("duration", time.Since(start)))
	if ap, ok := core.AddrPortOf(s.Conn.RemoteAddr()); ok {
		fs.IP("client_ip", ap.Addr())
	}
	l.Write(start, "connection", fs)
}

// observeStream resolves the series of a layer-4 route being built.
func (b *builder) observeStream(rt *route) error {
	if !b.p.reqMetrics || rt.stream == nil {
		return nil
	}
	s, err := b.p.requestSeriesOf()
	if err != nil {
		return err
	}
	rt.l4obs = s.streamObsOf(b.holdSeries(s), b.gateway, routeObject(rt.name))
	return nil
}
