package proxy

import (
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1server"
)

// Per-request observation: the metrics and the access log line of each HTTP request, recorded by
// socket.ServeHTTP when the handler returns. What only the route and the upstream know (which
// route took the request, which cluster and endpoint served it, how long the upstream took) they
// write into the request's record, which lives in the response writer: the HTTP/1.1 server's own
// (reset per request, so nothing is allocated) or, for HTTP/2, a pooled obsWriter around
// net/http's.

// reqRecord is what the route and upstream learn about one request.
type reqRecord struct {
	on       bool   // the request is observed (metrics or access log on)
	listener string // the IR listener that took it (core.RequestObserver's origin)
	rt       *route // the route that took it; nil: none matched
	// client is the client a filter resolved (core.WithClientAddr); invalid: the one the
	// dispatched request resolves to (PROXY protocol, trusted X-Forwarded-For, the peer).
	client   netip.AddrPort
	cluster  *cluster
	endpoint string // "address:port" of the endpoint of the last try
	upStart  time.Time
	upDur    time.Duration // summed over tries
}

// recordOf finds the record of the request w answers, through the writers filters wrap around
// it; nil when the request is not observed.
func recordOf(w http.ResponseWriter) *reqRecord {
	for {
		switch x := w.(type) {
		case *h1server.Writer:
			if rec, ok := x.Scratch().(*reqRecord); ok {
				return rec.active()
			}
			return nil
		case *obsWriter:
			return x.rec.active()
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

func (r *reqRecord) active() *reqRecord {
	if r.on {
		return r
	}
	return nil
}

// origin is the listener and Gateway that took the request.
func (r *reqRecord) origin() (listener, gateway string) {
	if r.rt != nil {
		gateway = r.rt.gateway
	}
	return r.listener, gateway
}

// observeClient records the client a filter resolved.
func (r *reqRecord) observeClient(a netip.AddrPort) {
	if r.on {
		r.client = a
	}
}

// The proxy's response writers carry the record: they are core.RequestObservers (the HTTP/1.1
// server's Writer passes the calls on to its scratch value, a reqRecord).
var (
	_ core.RequestObserver = (*h1server.Writer)(nil)
	_ core.RequestObserver = (*obsWriter)(nil)
	_ core.RequestObserver = (*reqRecord)(nil)
)

// ObserveClient implements core.RequestObserver for the HTTP/1.1 server's Writer.
func (r *reqRecord) ObserveClient(a netip.AddrPort) { r.observeClient(a) }

// ObservedOrigin implements core.RequestObserver for the HTTP/1.1 server's Writer: nothing while
// the connection's record observes no request.
func (r *reqRecord) ObservedOrigin() (string, string) {
	if !r.on {
		return "", ""
	}
	return r.origin()
}

// ObserveClient implements core.RequestObserver.
func (w *obsWriter) ObserveClient(a netip.AddrPort) { w.rec.observeClient(a) }

// ObservedOrigin implements core.RequestObserver.
func (w *obsWriter) ObservedOrigin() (string, string) { return w.rec.origin() }

// upstreamStart records the endpoint a try goes to.
func (r *reqRecord) upstreamStart(cl *cluster, endpoint string) {
	if r != nil {
		r.cluster, r.endpoint, r.upStart = cl, endpoint, time.Now()
	}
}

// upstreamEnd records the end of a try.
func (r *reqRecord) upstreamEnd() {
	if r != nil {
		r.upDur += time.Since(r.upStart)
	}
}

// listenerObs is what a listener's requests are observed with in one table.
type listenerObs struct {
	listener string
	unrouted *routeObs // requests no route took (404, 421, listener filters' answers)
	log      *accesslog.Logger
	metrics  bool
}

// obsWriter records the status and body size of a response net/http serves (HTTP/2).
type obsWriter struct {
	http.ResponseWriter
	status  int
	wrote   bool
	written int64
	rec     reqRecord
}

var obsWriters = sync.Pool{New: func() any { return new(obsWriter) }}

func getObsWriter(w http.ResponseWriter, listener string) *obsWriter {
	ow := obsWriters.Get().(*obsWriter)
	*ow = obsWriter{ResponseWriter: w, status: http.StatusOK, rec: reqRecord{on: true, listener: listener}}
	return ow
}

func putObsWriter(ow *obsWriter) {
	*ow = obsWriter{}
	obsWriters.Put(ow)
}

func (w *obsWriter) WriteHeader(code int) {
	if !w.wrote && code >= 200 {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *obsWriter) Write(p []byte) (int, error) {
	w.wrote = true
	n, err := w.ResponseWriter.Write(p)
	w.written += int64(n)
	return n, err
}

// Flush and FlushError keep the inner writer's flushing (streams, gRPC).
func (w *obsWriter) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController calls.
func (w *obsWriter) FlushError() error {
	if f, ok := w.ResponseWriter.(interface{ FlushError() error }); ok {
		return f.FlushError()
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
		return nil
	}
	return http.ErrNotSupported
}

// Unwrap lets http.ResponseController reach net/http's writer (deadlines, Hijack).
func (w *obsWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var _ http.Flusher = (*obsWriter)(nil)

// serveObserved serves r on ls and records its metrics and access log line.
func (ls *ListenerState) serveObserved(w http.ResponseWriter, r *http.Request) {
	var start time.Time
	var ow *obsWriter
	var rec *reqRecord
	hw, isH1 := w.(*h1server.Writer)
	if isH1 {
		rec, isH1 = hw.Scratch().(*reqRecord)
	}
	if isH1 {
		start = hw.Arrived() // the request's arrival, read once by the server
		// The record is the connection's: reset for each request, and off again after it.
		*rec = reqRecord{on: true, listener: ls.obs.listener}
	} else {
		start = time.Now()
		ow = getObsWriter(w, ls.obs.listener)
		w = ow
	}
	completed := false
	defer func() {
		if isH1 {
			ls.observe(r, rec, hw.Status(), hw.Written(), start, !completed)
			rec.on = false
			return
		}
		ls.observe(r, &ow.rec, ow.status, ow.written, start, !completed)
		putObsWriter(ow)
	}()
	ls.serveHTTP(w, r)
	completed = true
}

// observe records one finished request.
func (ls *ListenerState) observe(r *http.Request, rec *reqRecord, status int, written int64, start time.Time, aborted bool) {
	end := time.Now()
	o := ls.obs
	ro := o.unrouted
	if rec.rt != nil {
		ro = rec.rt.obs
	}
	if o.metrics && ro != nil {
		ro.backend(rec.cluster).count(ro.series, classOf(status, aborted))
		ro.route.observe(ro.series, end.Sub(start).Seconds())
	}
	if o.log.Sampled() {
		ls.logRequest(r, rec, status, written, start, end, aborted)
	}
}
