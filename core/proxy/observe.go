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

// reqRecord is what the route and upstream learn about one request. What every observed request
// uses comes first, what only a logged one reads after it (begin resets that part only for a
// logged request: the HTTP/1.1 record is its connection's, so a request of metrics only touches
// one or two of its cache lines).
type reqRecord struct {
	on bool // the request is observed (metrics or access log on)
	// logged: the request's access log line is to be written (the log is on and its sample took
	// the request, decided when the request starts); only then are its upstream tries timed.
	logged    bool
	completed bool   // the handler returned (false in the deferred observation: it panicked)
	listener  string // the IR listener that took it (core.RequestObserver's origin)
	rt        *route // the route that took it; nil: none matched
	cluster   *cluster

	// Read only when logged (stale from an earlier request of the connection otherwise).
	endpoint string        // "address:port" of the endpoint of the last try
	upStart  time.Duration // the try's start on the monotonic clock (monoNow)
	upDur    time.Duration // summed over tries
	// client is the client a filter resolved (core.WithClientAddr); invalid: the one the
	// dispatched request resolves to (PROXY protocol, trusted X-Forwarded-For, the peer).
	client netip.AddrPort
	// conn is the connection's client and socket peer for the access log, kept across requests
	// (the HTTP/1.1 server's record is its connection's) when they are the same for all of them.
	conn connPeers
}

// connPeers are a connection's client and socket peer (core.ConnClientAndSocketPeer).
type connPeers struct {
	client, peer netip.AddrPort
	known        bool
}

// peers is the client and socket peer of r, the record's request: from the record when its
// connection's are known, else looked up (and kept when they hold for the connection).
func (rec *reqRecord) peers(r *http.Request) (client, peer netip.AddrPort) {
	if rec.conn.known {
		return rec.conn.client, rec.conn.peer
	}
	client, peer, perConn := core.ConnClientAndSocketPeer(r)
	rec.conn = connPeers{client: client, peer: peer, known: perConn}
	return client, peer
}

// begin starts observing a request on a listener observed with o, resetting what an earlier
// request of the record's connection left (but what holds for the connection).
func (r *reqRecord) begin(o *listenerObs) {
	r.on, r.logged, r.completed = true, o.log.Sampled(), false
	r.listener, r.rt, r.cluster = o.listener, nil, nil
	if r.logged {
		r.endpoint, r.upStart, r.upDur, r.client = "", 0, 0, netip.AddrPort{}
	}
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

// monoEpoch anchors monoNow.
var monoEpoch = time.Now()

// monoNow reads the monotonic clock only: time.Since of a time that has a monotonic reading
// takes one clock read, where time.Now takes two (wall and monotonic): 25 against 36 ns of CPU on
// the benchmark VM (docs/observability.md), where the observed path read the clock five times per
// request; it now reads it as few times as it can.
func monoNow() time.Duration { return time.Since(monoEpoch) }

// upstreamStart records the endpoint a try goes to, and when it started if the request is logged
// (only the access log has the upstream's duration).
func (r *reqRecord) upstreamStart(cl *cluster, endpoint string) {
	if r != nil {
		r.cluster, r.endpoint = cl, endpoint
		if r.logged {
			r.upStart = monoNow()
		}
	}
}

// upstreamEnd records the end of a try.
func (r *reqRecord) upstreamEnd() {
	if r != nil && r.logged {
		r.upDur += monoNow() - r.upStart
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

func getObsWriter(w http.ResponseWriter, o *listenerObs) *obsWriter {
	ow := obsWriters.Get().(*obsWriter)
	*ow = obsWriter{ResponseWriter: w, status: http.StatusOK}
	ow.rec.begin(o)
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

// serveObserved serves r on ls and records its metrics and access log line. The observation is
// deferred so that a request whose handler panics (http.ErrAbortHandler: the client or the
// upstream went away mid-response) is still counted, as aborted.
func (ls *ListenerState) serveObserved(w http.ResponseWriter, r *http.Request) {
	if hw, ok := w.(*h1server.Writer); ok {
		if rec, ok := hw.Scratch().(*reqRecord); ok {
			// The record is the connection's: begun for each request, off again after it.
			rec.begin(ls.obs)
			defer ls.observeH1(hw, rec, r)
			ls.serveHTTP(hw, r)
			rec.completed = true
			return
		}
	}
	ow := getObsWriter(w, ls.obs)
	defer ls.observeWrapped(ow, r, time.Now())
	ls.serveHTTP(ow, r)
	ow.rec.completed = true
}

// observeH1 records a request the HTTP/1.1 server served: from its arrival, which the server
// read once, to the end of its handler, a reading the server takes for its own instead of
// reading the clock again after the response (Writer.Ended). The connection's record is off
// again afterwards.
func (ls *ListenerState) observeH1(hw *h1server.Writer, rec *reqRecord, r *http.Request) {
	start := hw.Arrived()
	ls.observe(r, rec, hw.Status(), hw.Written(), start, hw.Ended().Sub(start))
	rec.on = false
}

// observeWrapped records a request net/http served (HTTP/2) and returns its writer to the pool.
// Its end is one clock read, monotonic only (start carries the monotonic reading).
func (ls *ListenerState) observeWrapped(ow *obsWriter, r *http.Request, start time.Time) {
	ls.observe(r, &ow.rec, ow.status, ow.written, start, time.Since(start))
	putObsWriter(ow)
}

// observe records one finished request that started at start and took d.
func (ls *ListenerState) observe(r *http.Request, rec *reqRecord, status int, written int64, start time.Time, d time.Duration) {
	o := ls.obs
	ro := o.unrouted
	if rec.rt != nil {
		ro = rec.rt.obs
	}
	if o.metrics && ro != nil {
		ro.backend(rec.cluster).count(ro.series, classOf(status, !rec.completed))
		ro.observeDuration(d)
	}
	if rec.logged {
		ls.logRequest(r, rec, status, written, start, d)
	}
}
