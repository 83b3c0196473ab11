package proxy

import (
	"net/http"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
)

// logRequest hands r's access log record to the log (docs/observability.md lists the fields).
// Only what the request, its route and the table already hold is captured, by value: the
// request's strings are immutable (the HTTP/1.1 server makes a fresh string of each request's
// head, and net/http's HTTP/2 server allocates its own), so the log's writer goroutine may encode
// them after the request is done. Nothing is allocated or encoded here.
func (ls *ListenerState) logRequest(r *http.Request, rec *reqRecord, status int, written int64, start, end time.Time, aborted bool) {
	l := ls.obs.log
	lr := accesslog.Record{
		Kind:      accesslog.KindRequest,
		Time:      start,
		Listener:  ls.obs.listener,
		Upstream:  rec.endpoint,
		Method:    r.Method,
		Host:      r.Host,
		Path:      r.URL.Path,
		Protocol:  r.Proto,
		Status:    status,
		Aborted:   aborted,
		BytesIn:   max(r.ContentLength, 0),
		BytesOut:  written,
		Duration:  end.Sub(start),
		RequestID: headerValue(r.Header, "X-Request-Id"),
	}
	client, peer := core.ClientAndSocketPeer(r)
	if rec.client.IsValid() {
		client = rec.client // a filter resolved it (the request r is the one dispatched, before filters)
	}
	lr.ClientIP, lr.PeerIP = client.Addr(), peer.Addr()
	if rt := rec.rt; rt != nil {
		lr.Gateway, lr.Route, lr.Rule = rt.gateway, rt.name, rt.rule
	}
	if rec.cluster != nil {
		lr.Backend = rec.cluster.name
	}
	if rec.endpoint != "" {
		lr.UpstreamDuration = rec.upDur
	}
	if l.Query() {
		lr.Query = r.URL.RawQuery
	}
	if r.TLS != nil {
		lr.TLSSNI = r.TLS.ServerName
	}
	l.Log(&lr)
}

// headerValue is h's first value of the canonical key, without Header.Get's canonicalization.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
