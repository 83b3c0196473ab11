package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

// h1Forwarder is the fast path to HTTP/1.1 clusters. The serving goroutine writes the request and
// reads the response on a pooled connection itself: no per-connection read and write goroutines
// (each handoff is a scheduler wake-up, ≈35 µs on a small VM), no clone of the request, and the
// response header copied into the client's header map with a handful of allocations.
//
// It takes requests without a body (the common GET/HEAD/DELETE), and leaves to the stdlib reverse
// proxy everything it does not do: request bodies (which need the body written while the response
// is read, and 100-continue), Upgrade (WebSocket) and requests carrying trailers.
type h1Forwarder struct {
	ep       *core.Endpoint               // the endpoint of a one-endpoint cluster, and its pool
	pool     *h1Pool                      //
	pools    map[*core.Endpoint]*h1Pool   // otherwise; built once per table, read-only
	fallback atomic.Pointer[reverseProxy] // made on first use: most routes never need it
	fwds     *forwarders                  // makes the fallback; its logger
	cl       *cluster
	resp     []core.HTTPResponseFilter
	errw     core.HTTPErrorWriter
	rht      time.Duration // response header timeout; 0 means none
}

var _ forwarder = (*h1Forwarder)(nil)

// h1Exchange is the per-request scratch of the fast path, pooled.
type h1Exchange struct {
	head h1Head
}

var exchanges = sync.Pool{New: func() any { return &h1Exchange{} }}

// copyBufs are the buffers chunked bodies are copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (f *h1Forwarder) forward(w http.ResponseWriter, r *http.Request, ep *core.Endpoint) {
	pool := f.pool
	if ep != f.ep {
		pool = f.pools[ep]
	}
	if pool == nil || !fastPathable(r) {
		f.slowPath().forward(w, r, ep)
		return
	}
	x := exchanges.Get().(*h1Exchange)
	defer exchanges.Put(x)
	ctx := r.Context()
	c, err := f.exchange(ctx, r, pool, x)
	if err != nil {
		f.fail(w, r, ep, err)
		return
	}
	f.relay(w, r, c, x)
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
	// declaring a zero length (more DATA would be a stream error). Chunked or unknown length is -1.
	if r.ContentLength != 0 || r.Trailer != nil {
		return false
	}
	// "Upgrade: h2c" is dropped, never tunnelled (see rewrite); other upgrades need a tunnel.
	return len(r.Header["Upgrade"]) == 0 || isH2CUpgrade(r)
}

func isH2CUpgrade(r *http.Request) bool {
	up := r.Header["Upgrade"]
	return len(up) > 0 && strings.EqualFold(up[0], "h2c")
}

// exchange sends r on a pooled connection and reads the response header into x. A reused
// connection that turns out closed before answering (the upstream's keep-alive timeout raced us)
// is replaced and the request sent again, which is safe: it has no body and nothing was received.
func (f *h1Forwarder) exchange(ctx context.Context, r *http.Request, pool *h1Pool, x *h1Exchange) (*h1Conn, error) {
	for attempt := 0; ; attempt++ {
		var c *h1Conn
		var err error
		if attempt < 2 {
			c, err = pool.get(ctx)
		} else {
			c, err = pool.dial(ctx)
		}
		if err != nil {
			return nil, err
		}
		err = f.roundTrip(ctx, r, c, x)
		if err == nil {
			return c, nil
		}
		_ = c.nc.Close()
		if !c.reused || !staleConn(err) || ctx.Err() != nil {
			return nil, err
		}
	}
}

// staleConn reports whether err is how a kept-alive connection closed by the peer shows up.
func staleConn(err error) bool {
	return errors.Is(err, errH1NothingRead) || errors.Is(err, syscall.EPIPE) || isConnReset(err)
}

func isConnReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// roundTrip writes the request and reads the response header, under the response-header timeout
// and the request's deadline; a request whose context is cancelled (an HTTP/2 stream reset, a
// client gone from a net/http connection) unblocks it at once. The response-header timeout is
// re-armed lazily: a deadline still at least half the timeout away is left as it is, so that a
// busy connection does not touch its timer on every request (the wait is bounded by between half
// and all of the timeout).
func (f *h1Forwarder) roundTrip(ctx context.Context, r *http.Request, c *h1Conn, x *h1Exchange) error {
	ctxDeadline, hasCtx := ctx.Deadline()
	now := time.Now()
	switch {
	case hasCtx && (f.rht == 0 || ctxDeadline.Before(now.Add(f.rht))):
		c.setDeadline(ctxDeadline)
	case f.rht > 0:
		if c.deadline.IsZero() || c.deadline.Before(now.Add(f.rht/2)) {
			c.setDeadline(now.Add(f.rht))
		}
	case !c.deadline.IsZero():
		c.setDeadline(time.Time{})
	}
	var stop func() bool
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	}
	writeRequest(c.bw, r)
	err := c.bw.Flush()
	if err == nil {
		err = x.head.read(c.br)
	}
	if stop != nil && !stop() {
		return ctx.Err()
	}
	return err
}

// bodyDeadline sets the deadline the body is read under before it is copied: the request's own, or
// none (a download may outlast the response-header timeout). A body already buffered whole needs
// no read and no timer.
func bodyDeadline(ctx context.Context, c *h1Conn, hd *h1Head, method string) {
	if hd.bodyless(method) || (hd.length >= 0 && int64(c.br.Buffered()) >= hd.length) {
		return
	}
	if d, ok := ctx.Deadline(); ok {
		if !d.Equal(c.deadline) {
			c.setDeadline(d)
		}
	} else if !c.deadline.IsZero() {
		c.setDeadline(time.Time{})
	}
}

var aLongTimeAgo = time.Unix(1, 0)

// fail answers an exchange that produced no response: 504 for a deadline, 502 otherwise. A client
// that went away gets nothing.
func (f *h1Forwarder) fail(w http.ResponseWriter, r *http.Request, ep *core.Endpoint, err error) {
	ctxErr := r.Context().Err()
	if ctxErr != nil && !errors.Is(ctxErr, context.DeadlineExceeded) {
		f.fwds.log.Debug("client canceled", zap.String("host", r.Host), zap.Error(err))
		return
	}
	status := http.StatusBadGateway
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(ctxErr, context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	case errors.As(err, &op) && op.Op == "dial":
	case errors.As(err, &ne) && ne.Timeout():
		status = http.StatusGatewayTimeout
	}
	f.fwds.log.Debug("upstream error", zap.String("host", r.Host), zap.String("upstream", ep.HostPort),
		zap.Int("status", status), zap.Error(err))
	f.errw.WriteError(w, r, status, http.StatusText(status))
}

// chunkedReader is httputil's, which rejects malformed chunk sizes and lines.
func chunkedReader(c *h1Conn) interface{ Read([]byte) (int, error) } {
	return httputil.NewChunkedReader(c.br)
}
