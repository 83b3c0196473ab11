package h1server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/connfeed"

	"go.uber.org/zap"
)

// Config is what the engine hands the server: the handler every request goes to (the engine
// routes it on the table current when it arrives; the server knows nothing of routes), the
// limits it enforces, and the HTTP/2 server connections that negotiate HTTP/2 are handed to.
type Config struct {
	// Handler serves each request. It must not keep the request or its header after returning
	// (the next request on the connection reuses them).
	Handler http.Handler
	// MaxHeaderBytes and MaxHeaderFields bound a request's header (431 beyond): both required.
	MaxHeaderBytes  int
	MaxHeaderFields int
	// ReadHeaderTimeout bounds the reading of a request's header, and is how long a keep-alive
	// connection may idle before it is parked (its buffers and goroutine let go). Zero: none.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a connection idle that long; zero: never.
	IdleTimeout time.Duration
	// WriteTimeout bounds the writing of each response; zero: none.
	WriteTimeout time.Duration
	// RequestBodyTimeout is the longest wait for more of a request body; zero: none.
	RequestBodyTimeout time.Duration
	// Log gets bad requests (debug) and handler panics.
	Log *zap.Logger
	// ConnContext, if set, derives each connection's context (what the listener knows of it).
	ConnContext func(ctx context.Context, c net.Conn) context.Context
	// NewScratch, if set, makes the value each connection's Writer carries for the engine
	// (Writer.Scratch): a per-request record kept there is allocated once per connection.
	NewScratch func() any
	// H2 serves the connections that speak HTTP/2: cleartext ones that open with the HTTP/2
	// preface (prior knowledge) and TLS ones that negotiated "h2" by ALPN. nil: none do.
	H2 H2Server
	// H2Stdlib is net/http's HTTP/2 server, used when H2 is nil; it must serve unencrypted
	// HTTP/2 too. nil with H2: HTTP/2 is not served.
	H2Stdlib *http.Server
}

// H2Server is the engine's own HTTP/2 server (core/proxy/internal/h2server) as this server uses
// it: it takes over a connection in the calling goroutine.
type H2Server interface {
	// ServeConn serves nc; r, if not nil, reads what was already read from it, then nc.
	ServeConn(nc net.Conn, r io.Reader)
	// Active is the number of connections it serves now.
	Active() int
	Shutdown(ctx context.Context) error
	Close() error
}

// New returns the engine's own HTTP/1.1 server, which a listener module may use instead of
// net/http's: it parses each request into a *http.Request that is reused for the life of the
// connection (header map, URL and body reader included), so a keep-alive request costs a few
// allocations instead of net/http's two dozen, and it sheds an idle connection's buffers and
// goroutine stack after ReadHeaderTimeout of silence, so an idle keep-alive connection costs a
// few KiB. HTTP/2 goes to cfg.H2, else to cfg.H2Stdlib (either may be nil): cleartext
// connections that open with the HTTP/2 preface, and *tls.Conn connections, already
// handshaken, that negotiated "h2" by ALPN. A TLS connection serving HTTP/1.1 keeps its buffers
// between requests (the poller cannot tell whether TLS has a whole record) and is not parked.
//
// The request's context is the connection's, cancelled when the client goes away during a
// request (see clientWatch) and when the connection ends.
func New(cfg Config) *Server {
	s := &Server{
		cfg:        cfg,
		h2:         cfg.H2Stdlib,
		h2own:      cfg.H2,
		maxHeader:  cfg.MaxHeaderBytes,
		maxFields:  cfg.MaxHeaderFields,
		readHeader: cfg.ReadHeaderTimeout,
		idle:       cfg.IdleTimeout,
		write:      cfg.WriteTimeout,
		bodyWait:   cfg.RequestBodyTimeout,
		conns:      map[*conn]struct{}{},
	}
	if s.h2own != nil {
		s.h2 = nil
	}
	if s.h2 != nil {
		s.h2ln = connfeed.New(nil)
	}
	return s
}

// ownServer is the http.ServerContextKey value of connections of a Server without a net/http
// HTTP/2 server (see start); only its presence matters.
var ownServer = &http.Server{}

func (s *Server) abortServer() *http.Server {
	if s.h2 != nil {
		return s.h2
	}
	return ownServer
}

// Server is the HTTP/1.1 server of one listener socket.
type Server struct {
	cfg        Config
	h2         *http.Server
	h2own      H2Server           // the engine's own HTTP/2 server, instead of h2
	h2ln       *connfeed.Listener // net/http's HTTP/2 server accepts the handed-over connections here
	maxHeader  int
	maxFields  int
	readHeader time.Duration
	idle       time.Duration
	write      time.Duration
	bodyWait   time.Duration // the longest wait for more of a request body

	closing atomic.Bool
	mu      sync.Mutex
	ln      net.Listener
	conns   map[*conn]struct{}
	h2done  chan struct{}
	// accepted counts the connections served (Stats).
	accepted atomic.Int64
}

// Serve accepts connections from l until it fails or the server is shut down
// (http.ErrServerClosed).
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	s.ln = l
	if s.h2 != nil {
		s.h2ln.SetAddr(l.Addr())
		s.h2done = make(chan struct{})
		go func() {
			defer close(s.h2done)
			_ = s.h2.Serve(s.h2ln)
		}()
	}
	s.mu.Unlock()
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return http.ErrServerClosed
			}
			return err
		}
		if !s.track(nil, nc) {
			_ = nc.Close()
			return http.ErrServerClosed
		}
	}
}

// track registers a new connection and starts serving it; false once the server is closing.
func (s *Server) track(_ *conn, nc net.Conn) bool {
	c := &conn{srv: s, nc: nc}
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		return false
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.accepted.Add(1)
	go c.start()
	return true
}

// Stats reports the server's connections (StatsReporter): those open now, and those it has taken
// since it started serving the socket. HTTP/2 connections are among them while they are open on
// the own HTTP/2 server, and until they are handed over to net/http's.
func (s *Server) Stats() map[string]int64 {
	s.mu.Lock()
	active := len(s.conns)
	s.mu.Unlock()
	if s.h2own != nil {
		active += s.h2own.Active()
	}
	return map[string]int64{"http_connections_active": int64(active), "http_connections_accepted": s.accepted.Load()}
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops accepting, closes idle connections, lets active ones finish their request (each
// answers with "Connection: close"), and waits for them until ctx is done.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.closeListeners()
	var h2err chan error
	if s.h2 != nil {
		h2err = make(chan error, 1)
		go func() { h2err <- s.h2.Shutdown(ctx) }()
	}
	if s.h2own != nil {
		h2err = make(chan error, 1)
		go func() { h2err <- s.h2own.Shutdown(ctx) }()
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		n := len(s.conns)
		for c := range s.conns {
			if c.idle.Load() {
				_ = c.nc.SetReadDeadline(aLongTimeAgo)
			}
		}
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if h2err != nil {
		return <-h2err
	}
	return nil
}

// Close closes every connection now.
func (s *Server) Close() error {
	s.closing.Store(true)
	s.closeListeners()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	if s.h2own != nil {
		return s.h2own.Close()
	}
	if s.h2 != nil {
		return s.h2.Close()
	}
	return nil
}

func (s *Server) closeListeners() {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	if s.h2ln != nil {
		_ = s.h2ln.Close()
	}
}

// conn is one client connection and everything reused across its requests.
type conn struct {
	srv      *Server
	nc       net.Conn
	br       *bufio.Reader // nil while the connection idles without buffers
	bw       *bufio.Writer
	ctx      context.Context
	cancel   context.CancelFunc
	remote   string
	tls      *tls.ConnectionState // nil on cleartext
	rw       readWaiter
	yield    yielder
	src      connSource  // beneath br: the bytes rw took off the socket, then the socket
	idle     atomic.Bool // waiting for a request (Shutdown may close it)
	hijacked bool
	// now is when the request being served arrived: one clock read per request serves its Date,
	// its body deadline and the header timeout's lazy re-arming (headerWindow).
	now time.Time
	// hdrDL is the header timeout's deadline as last armed on the socket; zero when the socket's
	// read deadline is something else (a body's, none), so that it is armed afresh.
	hdrDL time.Time
	// quiet is when the connection last finished a response (or opened): idle from then on.
	quiet time.Time

	head    reqHead
	trailer reqHead // a chunked body's trailer section, read and dropped
	req     *http.Request
	hdr     http.Header
	// vals backs the request header's value slices, reused by the next request like hdr (a
	// handler keeps neither; filters that append to a value copy it, each slice having the
	// capacity of its values).
	vals  []string
	u     url.URL
	body  Body
	w     Writer
	watch clientWatch
}

// A connection holds its buffers only while it serves a request (they go back to the pools in
// between), so the response buffer can be large enough for the header and a 16 KiB body to leave
// in one write.
const (
	h1ReadBufSize  = 4 << 10
	h1WriteBufSize = 32 << 10
)

var (
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, h1ReadBufSize) }}
	writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, h1WriteBufSize) }}
)

func (c *conn) buffers() {
	c.br = readers.Get().(*bufio.Reader)
	c.br.Reset(&c.src)
	c.bw = writers.Get().(*bufio.Writer)
	c.bw.Reset(c.nc)
}

func (c *conn) releaseBuffers() {
	if c.br != nil {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
	if c.bw != nil {
		c.bw.Reset(nil)
		writers.Put(c.bw)
		c.bw = nil
	}
}

func (c *conn) start() {
	s := c.srv
	c.remote = c.nc.RemoteAddr().String()
	c.src.nc = c.nc
	c.rw.init(c.nc, &c.src)
	c.buffers()
	c.quiet = time.Now()
	if s.readHeader > 0 {
		c.hdrDL = c.quiet.Add(s.readHeader)
		_ = c.nc.SetReadDeadline(c.hdrDL)
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		if st.NegotiatedProtocol == "h2" && s.hasH2() {
			c.releaseBuffers()
			c.handToH2(tc)
			return
		}
		c.tls = &st
	} else if s.hasH2() && c.isH2Preface() {
		c.handToH2(&replayConn{Conn: c.nc, r: c.br})
		return
	}
	// The requests' context is the connection's: one context per connection, not per request. It
	// is cancelled when the client goes away during a request (clientWatch) and when the
	// connection ends.
	ctx, cancel := context.WithCancel(context.Background())
	// http.ServerContextKey says the handler runs under a server that recovers
	// http.ErrAbortHandler, as handle does: httputil.ReverseProxy aborts a response whose upstream
	// body fails mid-copy only then, and otherwise ends it as if it were complete, which would
	// hand the client a truncated body as a whole one.
	ctx = context.WithValue(ctx, http.ServerContextKey, s.abortServer())
	if s.cfg.ConnContext != nil {
		ctx = s.cfg.ConnContext(ctx, c.nc)
	}
	c.ctx, c.cancel = ctx, cancel
	c.req = (&http.Request{}).WithContext(ctx)
	c.hdr = make(http.Header)
	if s.cfg.NewScratch != nil {
		c.w.scratch = s.cfg.NewScratch()
	}
	c.run()
}

// isH2Preface reports whether the connection opens with the HTTP/2 client preface. It peeks three
// bytes first, since an HTTP/1.1 request can be shorter than the preface. Until the first byte
// arrives the connection counts as idle, so Shutdown closes it rather than waiting out the header
// timeout: clients (net/http's Transport among them) keep connections they dialed and never used.
func (c *conn) isH2Preface() bool {
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	c.idle.Store(true)
	b, err := c.br.Peek(3)
	c.idle.Store(false)
	if err != nil || string(b) != preface[:3] {
		return false
	}
	b, err = c.br.Peek(len(preface))
	return err == nil && string(b) == preface
}

// handToH2 gives the connection to the HTTP/2 server: a TLS connection that negotiated h2, or a
// cleartext one with the bytes already read (the reader goes with it).
func (c *conn) handToH2(nc net.Conn) {
	s := c.srv
	s.untrack(c)
	_ = c.nc.SetReadDeadline(time.Time{})
	if c.bw != nil {
		c.bw.Reset(nil)
		writers.Put(c.bw)
		c.bw = nil
	}
	if s.h2own != nil {
		c.serveOwnH2(nc)
		return
	}
	if !s.h2ln.Deliver(nc) {
		_ = c.nc.Close()
	}
}

// replayConn reads what was buffered before the connection was handed over, then the socket.
type replayConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// run serves requests until the connection closes, is hijacked, or idles long enough to be parked
// without buffers (park).
func (c *conn) run() {
	for {
		switch c.wait() {
		case waitReady:
		case waitPark:
			c.park()
			return
		default:
			c.close()
			return
		}
		if err := c.head.read(c.br, c.srv.maxHeader, c.srv.maxFields); err != nil {
			c.replyError(err)
			c.close()
			return
		}
		if !c.serve() {
			if !c.hijacked { // else the handler owns the connection (and its buffers) now
				c.close()
			}
			return
		}
	}
}

type waitResult int

const (
	waitReady waitResult = iota
	waitPark
	waitClose
)

// wait waits for the first byte of the next request under the header timeout (armed when the
// previous request was served or at park). If the connection stays silent that long it is parked; a
// request that starts late in the window gets a fresh window for its header (headerWindow).
func (c *conn) wait() waitResult {
	s := c.srv
	if s.closing.Load() {
		return waitClose
	}
	if c.br.Buffered() > 0 || c.src.pending() {
		c.arrive()
		return waitReady
	}
	if c.rw.rc == nil {
		return c.waitBuffered()
	}
	// Between requests the connection holds no buffer: they go back to the pools while it waits
	// (the response was flushed), and are taken again when the next request arrives.
	c.releaseBuffers()
	c.idle.Store(true)
	c.yield.before() // on a busy proxy, let the others run first (yielder)
	err := c.rw.wait()
	c.yield.after(c.rw.parked)
	c.idle.Store(false)
	switch {
	case err == nil:
		c.buffers()
		c.arrive()
		c.headerWindow()
		return waitReady
	case s.closing.Load():
		return waitClose
	case isTimeout(err) && (s.idle == 0 || s.idle > s.readHeader):
		return waitPark
	}
	return waitClose
}

// arrive reads the clock as a request's first bytes are in (conn.now).
func (c *conn) arrive() {
	c.now = time.Now()
	c.src.waited = false
}

// headerWindow gives the header about to be read at least half the header timeout, re-arming it
// (for the whole timeout) only when less than that is left: a busy connection rarely touches its
// timer, and a header is always read under between half and all of ReadHeaderTimeout.
func (c *conn) headerWindow() {
	if d := c.srv.readHeader; d > 0 && c.hdrDL.Sub(c.now) < d/2 {
		c.hdrDL = c.now.Add(d)
		_ = c.nc.SetReadDeadline(c.hdrDL)
	}
}

// waitBuffered is wait for a connection the poller cannot be asked about (TLS): it waits in a
// buffered read, first for the header timeout, then until the idle timeout, and is never parked.
func (c *conn) waitBuffered() waitResult {
	s := c.srv
	// The writer is flushed and goes back to its pool; the reader may hold TLS record bytes.
	c.bw.Reset(nil)
	writers.Put(c.bw)
	c.bw = nil
	defer func() {
		if c.bw == nil {
			c.bw = writers.Get().(*bufio.Writer)
			c.bw.Reset(c.nc)
		}
	}()
	c.idle.Store(true)
	_, err := c.br.Peek(1)
	if err != nil && isTimeout(err) && !s.closing.Load() && s.idle > s.readHeader && s.readHeader > 0 {
		c.hdrDL = time.Time{}
		_ = c.nc.SetReadDeadline(c.quiet.Add(s.idle))
		_, err = c.br.Peek(1)
	}
	c.idle.Store(false)
	if err != nil || s.closing.Load() {
		return waitClose
	}
	c.arrive()
	c.headerWindow()
	return waitReady
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// park releases the connection's buffers and lets its goroutine (and the stack it grew serving
// requests) go: a fresh goroutine with a small stack waits for the socket to become readable, then
// serves on.
func (c *conn) park() {
	var deadline time.Time
	if s := c.srv; s.idle > 0 {
		deadline = c.quiet.Add(s.idle)
	}
	c.hdrDL = time.Time{}
	_ = c.nc.SetReadDeadline(deadline)
	go c.parked()
}

func (c *conn) parked() {
	c.idle.Store(true)
	err := c.rw.wait()
	c.idle.Store(false)
	if err != nil || c.srv.closing.Load() {
		c.close()
		return
	}
	c.buffers()
	if s := c.srv; s.readHeader > 0 {
		c.hdrDL = time.Now().Add(s.readHeader)
		_ = c.nc.SetReadDeadline(c.hdrDL)
	} else {
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	c.run()
}

func (c *conn) close() {
	if c.watch.t != nil {
		c.watch.t.Stop()
	}
	c.srv.untrack(c)
	_ = c.nc.Close()
	c.releaseBuffers()
	c.src.release()
	if c.cancel != nil {
		c.cancel()
	}
}

// replyError answers a request the parser refused, then the connection closes. I/O errors and
// timeouts close without an answer, as net/http does.
func (c *conn) replyError(err error) {
	var re *reqError
	if !errors.As(err, &re) {
		return
	}
	text := strconv.Itoa(re.status) + " " + http.StatusText(re.status)
	_, _ = c.bw.WriteString("HTTP/1.1 " + text + "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" + text)
	_ = c.bw.Flush()
	if ce := c.srv.cfg.Log.Check(zap.DebugLevel, "bad request"); ce != nil {
		ce.Write(zap.String("remote", c.remote), zap.Error(err))
	}
}

// coarseMin is the shortest timeout a reading up to clientWatchDelay old (plus the timer's
// lateness) may stand in for the clock with: 2% of it at most.
const coarseMin = time.Second

// drainLimit is how much of an unread request body is read to keep the connection; beyond it the
// connection closes.
const drainLimit = 256 << 10

// Lingering close bounds: how long, and how much of a request body the response refused, the
// server reads and discards after the response before it closes (see linger).
const (
	lingerTime = 500 * time.Millisecond
	lingerMax  = 256 << 10
)

// linger half-closes a connection whose client may still be sending a request body the response
// did not wait for (a 413, an early answer), then discards what the client sends for a moment:
// closing a socket with unread data resets the connection, and a client still writing often
// loses the response it had not read yet, so it would see "connection reset" instead of the
// answer. It reads at most lingerMax; a client that sends more than that is left to fill the
// socket buffers (its writes block, it reads the response) until lingerTime is up, as net/http
// waits before it closes. The connection is closed afterwards either way.
func (c *conn) linger() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	until := time.Now().Add(lingerTime)
	_ = c.nc.SetReadDeadline(until)
	if n, _ := io.CopyN(io.Discard, c.nc, lingerMax); n == lingerMax && !c.srv.closing.Load() {
		time.Sleep(time.Until(until))
	}
}

// serve runs one parsed request through the handler and completes its response. It reports whether
// the connection carries on.
func (c *conn) serve() bool {
	s := c.srv
	h := &c.head
	r := c.req
	if err := c.fillRequest(r, h); err != nil {
		c.replyError(err)
		return false
	}
	c.body.dl = time.Time{} // body.reset leaves it to this
	if h.chunked || h.length > 0 {
		// The body is read under the body timeout (re-armed as it arrives), not the header's.
		if s.bodyWait > 0 {
			c.body.dl = c.now.Add(s.bodyWait)
		}
		c.hdrDL = time.Time{}
		_ = c.nc.SetReadDeadline(c.body.dl)
	}
	if s.write > 0 {
		_ = c.nc.SetWriteDeadline(c.now.Add(s.write))
	}
	c.body.reset(c, h)
	r.Body = requestBody(&c.body, h)
	c.w.reset(c, h.minor, r.Method == http.MethodHead, h.close || s.closing.Load())
	if c.watch.early = r.Body == http.NoBody; c.watch.early {
		// Armed now, as the request begins: while the watch's timer has not come by, the reading
		// taken when the header was in is fresh (ClientWatch.Recent, quiet below). A header that
		// had to be waited for arrived later than its first bytes.
		c.watch.fresh = c.now
		if c.src.waited {
			c.watch.fresh = time.Now()
		}
		c.watchClient() // else the body does once it is read whole
	}
	aborted := c.handle(r)
	if h.chunked || h.length > 0 {
		c.body.close() // first: a body read may arm the watch
	}
	brief := c.unwatchClient() && c.watch.early
	if aborted || c.hijacked || c.watch.gone.Load() {
		return false // a client that went away gets no answer
	}
	ok := c.w.finish()
	if ok && !c.body.drain(drainLimit) {
		c.linger()
		ok = false
	}
	if !ok {
		return false
	}
	// One timer bounds both the wait for the next request (after which the connection is parked)
	// and the reading of its header. It is re-armed lazily, only when less than half the timeout
	// is left, so that a busy connection does not touch its timer on every request: the
	// connection is parked after between half and all of ReadHeaderTimeout of silence.
	// The handler's reading of the clock at its end (Writer.Ended) will do, if it took one: the
	// timers started from it are lazy by half their length anyway. Else a brief request
	// (unwatchClient) ended within clientWatchDelay of its fresh reading, which is close enough
	// for timeouts of seconds and saves a clock read per request.
	switch {
	case !c.w.ended.IsZero():
		c.quiet = c.w.ended
	case brief && s.readHeader >= coarseMin && (s.idle == 0 || s.idle >= coarseMin):
		c.quiet = c.watch.fresh
	default:
		c.quiet = time.Now()
	}
	switch {
	case s.readHeader > 0 && c.hdrDL.Sub(c.quiet) < s.readHeader/2:
		c.hdrDL = c.quiet.Add(s.readHeader)
		_ = c.nc.SetReadDeadline(c.hdrDL)
	case s.readHeader <= 0 && !c.body.dl.IsZero():
		_ = c.nc.SetReadDeadline(time.Time{})
	}
	return true
}

// handle calls the handler, reporting whether it panicked (http.ErrAbortHandler is how a handler
// aborts a response it cannot complete; anything else is logged). Either way the connection closes.
func (c *conn) handle(r *http.Request) (aborted bool) {
	defer func() {
		if p := recover(); p != nil {
			aborted = true
			if p != http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http does
				c.srv.cfg.Log.Error("handler panic", zap.Any("panic", p), zap.Stack("stack"))
			}
		}
	}()
	c.srv.cfg.Handler.ServeHTTP(&c.w, r)
	return false
}
