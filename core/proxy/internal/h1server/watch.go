package h1server

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/sockpeek"
)

// clientWatchDelay is the period of a connection's watch timer: a request that has run through
// one whole period (between one and two of them) gets its connection watched for the client going
// away. Watching costs a goroutine, a peek and a wake-up to stop it; a request answered sooner
// (nearly all of them) costs two atomic operations, and a busy connection's timer fires once a
// period, not once per request.
const clientWatchDelay = 20 * time.Millisecond

// The phases of a connection's watch (clientWatch.phase). The serving goroutine moves idle to armed
// when the handler starts (watchClient) and back to idle when it ends (unwatchClient); the timer
// moves armed to seen, and seen to running: a request the timer found in flight twice in a row
// has run at least one period and is watched.
const (
	watchIdle    int32 = iota // no request is watched
	watchArmed                // the handler runs; the timer has not come by since it started
	watchSeen                 // the timer came by once during this request
	watchRunning              // watch1 waits on the connection's reader
)

// clientWatch notices a client that goes away while its request is being served, as net/http's
// background read does: once the request body has been read whole, a goroutine waits on the
// connection's reader (Peek, which buffers and consumes nothing: the serving goroutine does not
// read while the handler runs, and takes the reader back before it does). End of stream, a TLS
// close_notify or a reset means the client is gone: the connection's context (every request's) is
// cancelled and the fast path's upstream connection, if there is one, is unblocked at once and
// then closed instead of pooled. Bytes from the client (a pipelined request) end the watch and stay
// buffered for the next request, so pipelining is unaffected; a request with bytes already
// buffered behind it is not watched at all.
//
// The timer is not armed and stopped per request (each a change to the runtime's timer heap, under
// its lock): it runs every clientWatchDelay while requests keep coming (tick), and a request only
// marks the phase. A request the timer has not come by is younger than a period, which also makes
// the request's arrival a clock reading fresh enough for timeouts of seconds (Recent, serve).
//
// A client that half-closes after sending its request (shutdown(SHUT_WR)) looks gone too, as it
// does to net/http.
type clientWatch struct {
	t        *time.Timer              // runs tick every clientWatchDelay while pending; nil until first needed
	done     chan struct{}            // one value per run of watch1
	pending  atomic.Bool              // t is set, or its tick is deciding whether to set it again
	phase    atomic.Int32             // watchIdle, watchArmed, watchSeen or watchRunning
	peek     sockpeek.Peek            // on the TCP socket (beneath TLS too), for clientReady
	off      bool                     // the socket cannot be polled (clientReady)
	armed    bool                     // watchClient ran for the current request (serving goroutine only)
	early    bool                     // the request had no body: armed as it began (serve)
	fresh    time.Time                // with early: when its header was in, for Recent
	stop     atomic.Bool              // the serving goroutine is taking the socket back
	gone     atomic.Bool              // the client went away; the connection is finished
	upstream atomic.Pointer[net.Conn] // the connection an exchange waits on (ClientWatch)
}

// ClientWatch is the engine's side of a connection's clientWatch: an upstream exchange made for
// the request registers the connection it waits on, which the watch unblocks (a deadline in the
// past) when the client goes away, and asks whether that happened. Registering costs an atomic
// store, where a context.AfterFunc on the request's context would cost a registration, a Done
// channel and a goroutine.
type ClientWatch clientWatch

// Watch returns the watch of the connection serving r, or nil when r is not the connection's
// own request (a handler passed on a copy or a derived one, whose context can end on its own:
// only a context.AfterFunc sees that).
func (w *Writer) Watch(r *http.Request) *ClientWatch {
	if r != w.c.req {
		return nil
	}
	return (*ClientWatch)(&w.c.watch)
}

// SetUpstream registers *nc as the connection to unblock if the client goes away; nil
// deregisters it. *nc must not change while it is registered.
func (cw *ClientWatch) SetUpstream(nc *net.Conn) { cw.upstream.Store(nc) }

// Gone reports whether the client went away. After SetUpstream(nil), false means the watch will
// not touch the upstream connection any more (clientGone sets it before it looks).
func (cw *ClientWatch) Gone() bool { return cw.gone.Load() }

// Recent returns a reading of the clock taken when the request's header was in, and true, when
// it will do for a deadline d away: d is at least coarseMin and the reading is less than
// clientWatchDelay old (plus however late the runtime runs the watch's timer), the request having
// had no body and the watch's timer not having come by since it began. A caller uses it instead
// of reading the clock. Serving goroutine only.
func (cw *ClientWatch) Recent(d time.Duration) (time.Time, bool) {
	if d >= coarseMin && cw.early && cw.phase.Load() == watchArmed {
		return cw.fresh, true
	}
	return time.Time{}, false
}

// watchClient arms the watch for the request being served, once the request body, if any, has been
// read whole, and only while the handler runs: on the serving goroutine, or in the body read that
// ends the body (which may be a transport's goroutine: serve closes the body, under its lock,
// before it calls unwatchClient, so the two are ordered). The timer is set only if it is not
// running already (a busy connection's runs on from its previous request).
func (c *conn) watchClient() {
	w := &c.watch
	if w.armed || c.hijacked || c.br.Buffered() > 0 || c.src.pending() {
		return
	}
	w.armed = true
	w.phase.Store(watchArmed)
	if w.t == nil {
		// Made stopped and set below, after w.t is written: tick reads it.
		w.done = make(chan struct{}, 1)
		w.t = time.AfterFunc(time.Hour, c.tick)
		w.t.Stop()
	}
	if w.pending.CompareAndSwap(false, true) {
		w.t.Reset(clientWatchDelay)
	}
}

// tick is the watch timer's function. It clears pending before it looks at the phase, so that a
// request arming meanwhile either sees pending clear and sets the timer itself, or is seen here.
// It sets the timer again only while a request runs, so an idle connection's timer stops.
func (c *conn) tick() {
	w := &c.watch
	w.pending.Store(false)
	switch {
	case w.phase.CompareAndSwap(watchArmed, watchSeen):
		if w.pending.CompareAndSwap(false, true) {
			w.t.Reset(clientWatchDelay)
		}
	case w.phase.CompareAndSwap(watchSeen, watchRunning):
		c.watch1()
	}
}

// initPeek readies the socket peek; false (for good) when the socket cannot be polled.
func (c *conn) initPeek() bool {
	w := &c.watch
	if w.peek.Initialized() {
		return true
	}
	if w.off {
		return false
	}
	nc := c.nc
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		w.off = true
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		w.off = true
		return false
	}
	w.peek.Init(rc)
	return true
}

// clientReady reports, without waiting, whether the client has sent bytes that are not read yet.
func (c *conn) clientReady() bool {
	return c.br.Buffered() > 0 || c.src.pending() || (c.initPeek() && c.watch.peek.Ready())
}

// unwatchClient disarms the watch; when it is running, it takes the socket back from it (a read
// deadline in the past wakes it) and waits for it to end. Afterwards the socket has no read
// deadline if the watch ran, and the one it had otherwise. It reports whether the request was
// armed and brief: the timer never came by while it ran, so it lasted less than clientWatchDelay
// (plus the timer's lateness) since it was armed.
func (c *conn) unwatchClient() (brief bool) {
	w := &c.watch
	if !w.armed {
		return false
	}
	w.armed = false
	if w.phase.CompareAndSwap(watchArmed, watchIdle) {
		return true
	}
	if w.phase.CompareAndSwap(watchSeen, watchIdle) {
		return false
	}
	// The timer moved seen to running: watch1 has the reader.
	w.stop.Store(true)
	_ = c.nc.SetReadDeadline(aLongTimeAgo)
	<-w.done
	w.stop.Store(false)
	w.phase.Store(watchIdle)
	c.hdrDL = time.Time{}
	_ = c.nc.SetReadDeadline(time.Time{})
	return false
}

// watch1 is one watch, on the timer's goroutine (tick). It clears the read deadline (the header timeout
// may still be set) and then checks stop, so that unwatchClient's past deadline either comes after
// the clearing and wakes the wait, or came before it and stop is seen.
func (c *conn) watch1() {
	w := &c.watch
	defer func() { w.done <- struct{}{} }()
	_ = c.nc.SetReadDeadline(time.Time{})
	if w.stop.Load() {
		return
	}
	_, err := c.br.Peek(1)
	if err == nil || w.stop.Load() || isTimeout(err) {
		return
	}
	c.clientGone()
}

// clientGone marks the connection finished and cancels what runs on its behalf. gone is set before
// the upstream connection is looked at, so a forwarder that finds gone unset after deregistering its
// connection knows the watch will not touch it (h1Exchange.release).
func (c *conn) clientGone() {
	w := &c.watch
	w.gone.Store(true)
	if c.cancel != nil {
		c.cancel()
	}
	if uc := w.upstream.Load(); uc != nil {
		_ = (*uc).SetDeadline(aLongTimeAgo)
	}
}
