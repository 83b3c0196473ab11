package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1server"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1wire"
)

// h1Forwarder is the fast path to HTTP/1.1 clusters. The serving goroutine writes the request and
// reads the response on a pooled connection itself: no per-connection read and write goroutines
// (each handoff is a scheduler wake-up, ≈35 µs on a small VM), no clone of the request, and the
// response header copied into the client's header map with a handful of allocations.
//
// It takes requests without a body and requests whose body it can read whole first (up to
// maxBufferedBody, see readBody), and leaves to the stdlib reverse proxy everything it does not do:
// larger or still-streaming bodies (which need the body written while the response is read),
// Expect: 100-continue (forwarded, so the upstream decides), Upgrade (WebSocket) and requests
// carrying trailers.
type h1Forwarder struct {
	fallback atomic.Pointer[reverseProxy] // made on first use: most routes never need it
	fwds     *forwarders                  // makes the fallback; its logger
	cl       *cluster                     // its endpoint set has the endpoints' pools
	resp     []core.HTTPResponseFilter
	errw     core.HTTPErrorWriter
	rht      time.Duration // response header timeout; 0 means none
}

var _ forwarder = (*h1Forwarder)(nil)

// h1Exchange is the per-request scratch of the fast path, pooled.
type h1Exchange struct {
	head    h1wire.Head
	body    []byte  // the request body, read whole
	bodyBuf *[]byte // its pooled buffer, nil when none

	// Cancellation (guard): the own server's connection watching its client, or else a
	// context.AfterFunc on the request's context, unblocks the connection in use.
	sc      *h1server.ClientWatch
	stop    func() bool
	live    atomic.Pointer[h1Conn]
	abortFn func() // abort, bound once
	lost    bool   // an AfterFunc may still be running: x is not pooled again
}

var exchanges = sync.Pool{New: func() any {
	x := &h1Exchange{}
	x.abortFn = x.abort
	return x
}}

// copyBufs are the buffers chunked bodies are copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (f *h1Forwarder) forward(w http.ResponseWriter, r *http.Request, ep *core.Endpoint) outcome {
	pool := f.cl.set.Load().h1Pool(ep)
	if pool == nil || !fastPathable(r) {
		return f.slowPath().forward(w, r, ep)
	}
	x := exchanges.Get().(*h1Exchange)
	defer x.done()
	switch res, err := x.readBody(r); res {
	case bodyRead:
	case bodyStreams:
		return f.streamBody(w, r, ep, x)
	default:
		f.refuseBody(w, r, err)
		return outcomeOK // the client's body failed, not the endpoint
	}
	x.guard(w, r)
	c, err := f.exchange(r.Context(), r, pool, x)
	if err != nil {
		return f.fail(w, r, ep, err)
	}
	return f.relay(w, r, c, x)
}

// slowPath is the stdlib reverse proxy, made on first use (two requests racing may both make one;
// either serves).
func (f *h1Forwarder) slowPath() *reverseProxy {
	if rp := f.fallback.Load(); rp != nil {
		return rp
	}
	rp := f.fwds.reverseProxy(f.cl, f.resp, f.errw)
	f.fallback.Store(rp)
	return rp
}

// fastPathable reports whether the fast path handles r.
func fastPathable(r *http.Request) bool {
	// net/http gives a request without a body ContentLength 0: HTTP/1.1 without Content-Length or
	// chunked framing (or with "Content-Length: 0"), HTTP/2 ending the stream with its headers or
	// declaring a zero length (more DATA would be a stream error). Chunked or unknown length is -1:
	// only the own server's chunked bodies are taken (readBody can tell whether they have arrived).
	if r.ContentLength > maxBufferedBody || r.Trailer != nil || len(r.Header["Expect"]) > 0 {
		return false
	}
	if r.ContentLength < 0 {
		if _, own := r.Body.(*h1server.Body); !own {
			return false
		}
	}
	// "Upgrade: h2c" is dropped, never tunnelled (see rewrite); other upgrades need a tunnel.
	return len(r.Header["Upgrade"]) == 0 || isH2CUpgrade(r)
}

func isH2CUpgrade(r *http.Request) bool {
	up := r.Header["Upgrade"]
	return len(up) > 0 && strings.EqualFold(up[0], "h2c")
}

// guard arms the cancellation of the exchange. A request of the own HTTP/1.1 server, unwrapped, is
// watched by its connection (clientWatch), which costs nothing here; a stream of the own HTTP/2
// server runs abort when reset (watchReset); any other request whose context can end gets a
// context.AfterFunc (a route timeout, net/http's HTTP/2 server).
func (x *h1Exchange) guard(w http.ResponseWriter, r *http.Request) {
	if hw, ok := w.(*h1server.Writer); ok {
		if x.sc = hw.Watch(r); x.sc != nil {
			return
		}
	}
	if stop, ok := watchReset(w, r, x.abortFn); ok {
		x.stop = stop // the own HTTP/2 server's stream: see watchReset
		return
	}
	if r.Context().Done() != nil {
		x.stop = context.AfterFunc(r.Context(), x.abortFn)
	}
}

// now returns the time to compute a deadline of length d from: the own server's recent reading
// when it will do for d (ClientWatch.Recent), else the clock's. It saves one clock read per use
// on a request without a body that is answered quickly (nearly all of them).
func (x *h1Exchange) now(d time.Duration) time.Time {
	if x.sc != nil {
		if t, ok := x.sc.Recent(d); ok {
			return t
		}
	}
	return time.Now()
}

// use makes c the connection a cancellation unblocks.
func (x *h1Exchange) use(c *h1Conn) {
	switch {
	case x.sc != nil:
		x.sc.SetUpstream(&c.nc)
	case x.stop != nil:
		x.live.Store(c)
	}
}

// cancelled reports whether the request was cancelled (or its context ended). Checked after a
// deadline is set on the connection: a cancellation that came before would have been overwritten.
func (x *h1Exchange) cancelled(ctx context.Context) bool {
	switch {
	case x.sc != nil:
		return x.sc.Gone()
	case x.stop != nil:
		return ctx.Err() != nil
	}
	return false
}

// abort unblocks the connection in use (context.AfterFunc).
func (x *h1Exchange) abort() {
	if c := x.live.Load(); c != nil {
		_ = c.nc.SetDeadline(aLongTimeAgo)
	}
}

// release disarms the guard and reports whether the connection may be pooled: not when a
// cancellation may have set its deadline in the past, or still be about to.
func (x *h1Exchange) release() bool {
	switch {
	case x.sc != nil:
		x.sc.SetUpstream(nil)
		ok := !x.sc.Gone() // see clientGone: unset now means the watch will not touch it
		x.sc = nil
		return ok
	case x.stop != nil:
		ok := x.stop()
		x.stop = nil
		x.live.Store(nil)
		x.lost = !ok
		return ok
	}
	return true
}

// done releases the exchange at the end of forward, panicking or not.
func (x *h1Exchange) done() {
	x.release()
	x.putBody()
	if !x.lost {
		exchanges.Put(x)
	}
}

// exchange sends r on a pooled connection and reads the response header into x. A reused
// connection that turns out closed before answering (the upstream's keep-alive timeout raced us)
// is replaced and the request sent again if it is replayable: its body, if any, is in x, and its
// method is idempotent as net/http's client counts them. A request that is not gets a pooled
// connection only after a peek shows it still open and silent, and is never sent twice.
func (f *h1Forwarder) exchange(ctx context.Context, r *http.Request, pool *h1Pool, x *h1Exchange) (*h1Conn, error) {
	replay := replayable(r)
	for attempt := 0; ; attempt++ {
		var c *h1Conn
		var err error
		if attempt < 2 {
			c, err = pool.get(ctx)
		} else {
			c, err = pool.dial(ctx)
		}
		for err == nil && c.reused && !replay && !c.alive() {
			_ = c.nc.Close()
			c, err = pool.get(ctx)
		}
		if err != nil {
			return nil, err
		}
		x.use(c)
		err = f.roundTrip(ctx, r, c, x)
		if err == nil {
			return c, nil
		}
		_ = c.nc.Close()
		if !c.reused || !replay || !staleConn(err) || x.cancelled(ctx) {
			return nil, err
		}
	}
}

// replayable reports whether r may be sent again after a connection failed under it, by net/http's
// rule: an idempotent method, or an idempotency key.
func replayable(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return len(r.Header["Idempotency-Key"]) > 0 || len(r.Header["X-Idempotency-Key"]) > 0
}

// staleConn reports whether err is how a kept-alive connection closed by the peer shows up.
func staleConn(err error) bool {
	return errors.Is(err, h1wire.ErrNothingRead) || errors.Is(err, syscall.EPIPE) || isConnReset(err)
}

func isConnReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// roundTrip writes the request and its body and reads the response header, under the
// response-header timeout and the request's deadline; a cancellation (guard) unblocks it at once.
// The response-header timeout is re-armed lazily: a deadline still at least half the timeout away
// is left as it is, so that a busy connection does not touch its timer on every request (the wait
// is bounded by between half and all of the timeout).
func (f *h1Forwarder) roundTrip(ctx context.Context, r *http.Request, c *h1Conn, x *h1Exchange) error {
	ctxDeadline, hasCtx := ctx.Deadline()
	var now time.Time
	if f.rht > 0 {
		now = x.now(f.rht)
	}
	set := true
	switch {
	case hasCtx && (f.rht == 0 || ctxDeadline.Before(now.Add(f.rht))):
		c.setDeadline(ctxDeadline)
	case f.rht > 0:
		if set = c.deadline.IsZero() || c.deadline.Before(now.Add(f.rht/2)); set {
			c.setDeadline(now.Add(f.rht))
		}
	case !c.deadline.IsZero():
		c.setDeadline(time.Time{})
	default:
		set = false
	}
	if set && x.cancelled(ctx) {
		return cancelErr(ctx)
	}
	writeRequest(c.bw, r, int64(len(x.body)))
	_, _ = c.bw.Write(x.body)
	c.send.armed = true // the flush sends what is left and waits for the answer (h1send.go)
	err := c.bw.Flush()
	c.send.armed = false
	if err == nil {
		err = x.head.Read(c.br)
	}
	if x.cancelled(ctx) {
		return cancelErr(ctx)
	}
	return err
}

// cancelErr is the error of a cancelled exchange: the context's (a deadline is a 504), else
// errClientGone (the client went away and the context's cancellation may still be under way).
func cancelErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return errClientGone
}

// errClientGone is how the own server's client watch cancels an exchange (upstreamStatus: no answer,
// not the endpoint's fault).
var errClientGone = fmt.Errorf("client went away: %w", context.Canceled)

// clientLeft reports whether the client went away during the exchange (rather than a deadline
// passing). Asked before release.
func (x *h1Exchange) clientLeft(ctx context.Context) bool {
	return (x.sc != nil && x.sc.Gone()) || errors.Is(ctx.Err(), context.Canceled)
}

// bodyDeadline sets the deadline the body is read under before it is copied: the request's own, or
// none (a download may outlast the response-header timeout). A body already buffered whole needs
// no read and no timer. It reports false when the request was cancelled meanwhile.
func bodyDeadline(ctx context.Context, c *h1Conn, x *h1Exchange, method string) bool {
	hd := &x.head
	if hd.Bodyless(method) || (hd.Length >= 0 && int64(c.br.Buffered()) >= hd.Length) {
		return true
	}
	if d, ok := ctx.Deadline(); ok {
		if d.Equal(c.deadline) {
			return true
		}
		c.setDeadline(d)
	} else {
		if c.deadline.IsZero() {
			return true
		}
		c.setDeadline(time.Time{})
	}
	return !x.cancelled(ctx)
}

var aLongTimeAgo = time.Unix(1, 0)

// fail answers an exchange that produced no response (upstreamStatus: 504 past a deadline, 502
// otherwise), unless a retry takes the failure (absorbed). A client that went away gets nothing.
func (f *h1Forwarder) fail(w http.ResponseWriter, r *http.Request, ep *core.Endpoint, err error) outcome {
	countUpstreamError(w, r, err)
	if absorbed(w, r, err) {
		return errOutcome(r, err)
	}
	log := f.fwds.log
	status, ok := upstreamStatus(r, err)
	if !ok {
		log.Debug("client canceled", zap.String("host", r.Host), zap.Error(err))
		return outcomeOK
	}
	logUpstreamError(log, f.cl.name, r, ep.HostPort, status, err)
	f.errw.WriteError(w, r, status, http.StatusText(status))
	return errOutcome(r, err)
}

// chunkedReader is httputil's, which rejects malformed chunk sizes and lines.
func chunkedReader(c *h1Conn) interface{ Read([]byte) (int, error) } {
	return httputil.NewChunkedReader(c.br)
}
