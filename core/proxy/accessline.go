package proxy

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

// logRequest writes r's access log line (docs/observability.md lists the fields). Every field is
// a string, number or duration the request already holds, so building the line allocates nothing;
// zap encodes it into a pooled buffer that the log's writer goroutine writes out.
func (ls *ListenerState) logRequest(r *http.Request, rec *reqRecord, ro *routeObs, status int, written int64, start, end time.Time, aborted bool) {
	l := ls.obs.log
	fs := l.Get()
	fs.Add(zap.String("listener", ls.obs.listener))
	if ro != nil && ro.gateway != "" {
		fs.Add(zap.String("gateway", ro.gateway))
	}
	if rt := rec.rt; rt != nil {
		fs.Add(zap.String("route", rt.name))
		if rt.rule != "" {
			fs.Add(zap.String("rule", rt.rule))
		}
	}
	if rec.cluster != nil {
		fs.Add(zap.String("backend", rec.cluster.name))
	}
	if rec.endpoint != "" {
		fs.Add(zap.String("upstream", rec.endpoint))
	}
	fs.Add(zap.String("method", r.Method))
	fs.Add(zap.String("host", r.Host))
	fs.Add(zap.String("path", r.URL.Path))
	if l.Query() && r.URL.RawQuery != "" {
		fs.Add(zap.String("query", r.URL.RawQuery))
	}
	fs.Add(zap.String("protocol", r.Proto))
	fs.Add(zap.Int("status", status))
	if aborted {
		fs.Add(zap.Bool("aborted", true))
	}
	fs.Add(zap.Int64("bytes_in", max(r.ContentLength, 0)))
	fs.Add(zap.Int64("bytes_out", written))
	fs.Add(zap.Duration("duration", end.Sub(start)))
	if rec.endpoint != "" {
		fs.Add(zap.Duration("upstream_duration", rec.upDur))
	}
	fs.IP("client_ip", core.ClientIP(r))
	if r.TLS != nil && r.TLS.ServerName != "" {
		fs.Add(zap.String("tls_sni", r.TLS.ServerName))
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		fs.Add(zap.String("request_id", id))
	}
	l.Write(start, "request", fs)
}
