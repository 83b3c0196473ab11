package proxy

import (
	"net/http"
	"time"

	"github.com/coxswain-labs/coxswain/core/accesslog"
)

// logRequest hands r's access log record to the log (docs/observability.md lists the fields).
// Only what the request, its route and the table already hold is captured, by value: the
// request's strings are immutable (the HTTP/1.1 server makes a fresh string of each request's
// head, and net/http's HTTP/2 server allocates its own), so the log's writer goroutine may encode
// them after the request is done. The fields are written straight into the log's queue slot
// (accesslog.Logger.Claim): nothing is allocated, copied a second time or encoded here.
func (ls *ListenerState) logRequest(r *http.Request, rec *reqRecord, status int, written int64, start time.Time, d time.Duration) {
	l := ls.obs.log
	// Everything that could fail (a nil URL would panic) is read before the slot is claimed: a
	// claimed slot must be published.
	path, query := r.URL.Path, ""
	if l.Query() {
		query = r.URL.RawQuery
	}
	client, peer := rec.peers(r)
	if rec.client.IsValid() {
		client = rec.client // a filter resolved it (the request r is the one dispatched, before filters)
	}
	e := l.Claim()
	if e == nil {
		return // dropped (counted) or the log is closing
	}
	lr := e.Record()
	lr.Kind = accesslog.KindRequest
	lr.Time = start
	lr.Listener = rec.listener
	lr.Upstream = rec.endpoint
	lr.Method, lr.Host, lr.Path, lr.Query, lr.Protocol = r.Method, r.Host, path, query, r.Proto
	lr.Status = status
	lr.Aborted = !rec.completed
	lr.BytesIn, lr.BytesOut = max(r.ContentLength, 0), written
	lr.Duration = d
	lr.RequestID = headerValue(r.Header, "X-Request-Id")
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
	if r.TLS != nil {
		lr.TLSSNI = r.TLS.ServerName
	}
	l.Publish(e)
}

// headerValue is h's first value of the canonical key, without Header.Get's canonicalization.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
