package h2server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// conn is one HTTP/2 connection. Its goroutine (serve) reads and dispatches frames; handler
// goroutines write their streams' frames under wmu. mu guards the stream table and the flow
// control windows; wmu guards the framer's writer side, the HPACK encoder and the socket
// writes. mu is never held while waiting for wmu (a write may block on a slow client).
//
// Frames are written into bw; when they reach the socket is unlockW's decision (see there):
// at once while at most one handler runs, else by the connection's flusher goroutine once the
// handlers that are ready have written theirs, so that concurrent streams' responses share a
// write(2).
type conn struct {
	srv    *Server
	nc     net.Conn
	fr     *http2.Framer
	br     *bufio.Reader
	bw     *bufio.Writer
	ctx    context.Context // the streams' parent: values only, never cancelled
	remote string
	tls    *tls.ConnectionState

	// read side, touched only by serve
	dec   *hpack.Decoder
	block headerBlock
	flood floodGuard
	// recvWork counts the request frames received (HEADERS, DATA with a payload), for the
	// flood guard's PING allowance.
	recvWork uint64

	wmu  sync.Mutex
	henc *hpack.Encoder
	hbuf bytes.Buffer
	// lowerCache: lower-case forms of the uncommon response header names (see lowerName).
	lowerCache map[string]string
	// tableResized: the client set SETTINGS_HEADER_TABLE_SIZE since the last header block.
	tableResized bool
	// sentWork counts the response frames written (HEADERS, DATA), for the flood guard's PING
	// allowance.
	sentWork uint64
	werr     error // the first write error; every later write fails with it
	// flushOwed: frames wait in bw for the flusher, which has been woken (see unlockW).
	flushOwed bool
	flusher   bool          // the flusher goroutine has been started
	flushc    chan struct{} // wakes the flusher
	done      chan struct{} // closed when the connection closes: the flusher exits
	// busy counts the streams whose handler is running: with more than one, a response's
	// frames wait for the flusher so that those of the others can join them.
	busy atomic.Int32
	// peerFrame is the client's SETTINGS_MAX_FRAME_SIZE (read by writers under wmu).
	peerFrame atomic.Int32

	mu          sync.Mutex
	streams     map[uint32]*stream
	maxStreamID uint32 // the highest stream the client opened
	goAwayID    uint32 // set once GOAWAY went out: streams above it are ignored
	goingAway   bool
	// failed: the read loop ended on a connection error and the GOAWAY is being lingered over
	// (lingerClose); a stream that ends now must not end that read with the drain's deadline,
	// or the close finds unread data and resets the connection, GOAWAY and all.
	failed      bool
	closed      bool
	sendWin     int64 // connection send window
	peerWin     int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE for new streams
	winCh       chan struct{}
	recvTaken   int64 // connection window the client used and the server has not yet returned
	recvUnacked int64 // connection credit consumed but not yet returned by WINDOW_UPDATE
	idleTimer   *time.Timer
	ended       uint64 // streams ended, for the idle timer: activity since its last check
	idleSeen    uint64 // ended when the idle timer last looked
	resets      int    // streams the client reset before their response completed
	refused     int    // streams refused for exceeding MAX_CONCURRENT_STREAMS
	completed   int
	// gone remembers how the last streams to leave the table closed (closed.go).
	gone closedStreams
}

func newConn(s *Server, nc net.Conn, r io.Reader) *conn {
	if r == nil {
		r = nc
	}
	c := &conn{srv: s, nc: nc, remote: nc.RemoteAddr().String(), streams: map[uint32]*stream{},
		sendWin: 65535, peerWin: 65535, flushc: make(chan struct{}, 1), done: make(chan struct{})}
	c.peerFrame.Store(16384)
	c.bw = bufio.NewWriterSize(&deadlineWriter{nc: nc, stall: s.cfg.StallTimeout}, 32<<10)
	c.br = bufio.NewReaderSize(r, 16<<10)
	c.fr = http2.NewFramer(c.bw, c.br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(maxReadFrameSize)
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.dec = hpack.NewDecoder(4096, c.block.onField)
	c.dec.SetMaxStringLength(int(s.cfg.MaxHeaderListSize))
	c.block.conn = c
	if tc, ok := nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		c.tls = &st
	}
	return c
}

// connError ends the connection with a GOAWAY carrying code.
type connError struct {
	code   http2.ErrCode
	reason string
}

func (e connError) Error() string {
	return "http2: connection error " + e.code.String() + ": " + e.reason
}

func (c *conn) serve() {
	// The connection's context is not cancellable: close aborts every stream itself, and a
	// stream's context derived from a cancellable one would cost a registration in its parent
	// (a map insert and delete) per stream.
	c.ctx = context.Background()
	if c.srv.cfg.ConnContext != nil {
		c.ctx = c.srv.cfg.ConnContext(c.ctx, c.nc)
	}
	defer c.close()
	_ = c.nc.SetReadDeadline(time.Now().Add(c.srv.cfg.PrefaceTimeout))
	var pre [len(clientPreface)]byte
	if _, err := io.ReadFull(c.br, pre[:]); err != nil || string(pre[:]) != clientPreface {
		return
	}
	if err := c.writeSettings(); err != nil {
		return
	}
	err := c.readLoop()
	if err == nil {
		// A graceful end (drained): the client reads the last responses before the close.
		c.lockW()
		_ = c.lastFlushLocked(nil)
		c.wmu.Unlock()
		c.lingerClose()
		return
	}
	c.fail(err)
}

func (c *conn) writeSettings() error {
	cfg := &c.srv.cfg
	c.lockW()
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: cfg.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: cfg.MaxHeaderListSize},
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
	)
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, connWindow-65535)
	}
	return c.unlockW(err)
}

// lockW takes the write lock for a group of frames; unlockW or unlockWFlush ends it.
func (c *conn) lockW() { c.wmu.Lock() }

// unlockW releases the write lock after a group of frames. While at most one handler runs
// nothing else could join the write, so the frames are flushed now; with more, the flusher
// goroutine is woken (once per batch) and flushes after the goroutines that are ready have
// run, so that the responses of the streams answered together leave in one write(2) (as
// nginx and nghttp2 flush a connection once per event-loop turn). err is an error of the
// group's frame writes, returned as is; a later flush error ends the connection and fails the
// next write.
func (c *conn) unlockW(err error) error {
	if err == nil {
		err = c.werr
	}
	if err == nil && c.busy.Load() > 1 {
		wake := !c.flushOwed
		c.flushOwed = true
		if !c.flusher {
			c.flusher = true
			go c.flushLoop()
		}
		c.wmu.Unlock()
		if wake {
			select {
			case c.flushc <- struct{}{}:
			default:
			}
		}
		return nil
	}
	return c.unlockWFlush(err)
}

// unlockWFlush releases the write lock after flushing everything buffered (a GOAWAY before
// the close, or a lone stream's response).
func (c *conn) unlockWFlush(err error) error {
	err = c.flushLocked(err)
	c.wmu.Unlock()
	return err
}

// flushLoop writes out what the writers left in bw, once per wake-up, until the connection
// closes. It yields before flushing: it was woken by the first handler of a batch, and the
// handlers already runnable (their upstream answers arrived together) run first and add their
// frames to the same write.
func (c *conn) flushLoop() {
	for {
		select {
		case <-c.flushc:
		case <-c.done:
			return
		}
		runtime.Gosched()
		c.wmu.Lock()
		if c.flushOwed {
			_ = c.flushLocked(nil)
		}
		c.wmu.Unlock()
	}
}

// flushLocked flushes the writer; err is an earlier error of the same write, returned as is.
// Called with wmu held.
func (c *conn) flushLocked(err error) error {
	c.flushOwed = false
	if err == nil && c.werr != nil {
		err = c.werr
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil && c.werr == nil {
		c.werr = err
		_ = c.nc.Close() // the reader sees it and ends the connection
	}
	return err
}

// lastFlushLocked flushes the connection's last frames (its GOAWAY) before lingerClose and
// fails every later write: a handler still running must not write to the half-closed socket,
// whose write error would close it during the linger, and a close with unread data resets the
// connection, discarding the GOAWAY the client has not read yet. Called with wmu held.
func (c *conn) lastFlushLocked(err error) error {
	err = c.flushLocked(err)
	if c.werr == nil {
		c.werr = errConnClosed
	}
	return err
}

// deadlineWriter is the socket under the write buffer: every write to the socket is bounded
// by the stall timeout (a client that stops reading cannot hold a writer, and with it the
// connection's write lock, for longer). The deadline is moved only when an eighth of it has
// passed, which saves resetting the runtime's timer on every write.
type deadlineWriter struct {
	nc    net.Conn
	stall time.Duration
	set   time.Time
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(w.set) > w.stall/8 {
		w.set = now
		_ = w.nc.SetWriteDeadline(now.Add(w.stall))
	}
	return w.nc.Write(p)
}

// fail ends the connection after the read loop stopped with err: a connection error gets a
// GOAWAY with its code first. I/O errors and EOF close without one.
func (c *conn) fail(err error) {
	var ce connError
	var h2ce http2.ConnectionError
	code, send := http2.ErrCodeNo, false
	switch {
	case errors.As(err, &ce):
		code, send = ce.code, true
	case errors.As(err, &h2ce):
		code, send = http2.ErrCode(h2ce), true
	case errors.Is(err, http2.ErrFrameTooLarge):
		code, send = http2.ErrCodeFrameSize, true
	}
	if !send {
		return
	}
	if ce := c.srv.cfg.Log.Check(zap.DebugLevel, "http2 connection error"); ce != nil {
		ce.Write(zap.String("remote", c.remote), zap.Error(err))
	}
	c.mu.Lock()
	last := c.maxStreamID
	c.goingAway, c.failed = true, true
	c.mu.Unlock()
	c.lockW()
	werr := c.lastFlushLocked(c.fr.WriteGoAway(last, code, nil))
	c.wmu.Unlock()
	if werr == nil {
		c.lingerClose()
	}
}

// lingerClose half-closes the socket and reads what the client still sends for a moment, so
// that the GOAWAY reaches it rather than a reset of a socket with unread data.
func (c *conn) lingerClose() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.CopyN(io.Discard, c.nc, 256<<10)
}

// close ends the connection: streams are cancelled, their handlers see errors on the body and
// the writer.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	streams := make([]*stream, 0, len(c.streams))
	for _, st := range c.streams {
		streams = append(streams, st)
	}
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	c.signalWindowLocked()
	c.mu.Unlock()
	for _, st := range streams {
		st.abort(errConnClosed)
	}
	_ = c.nc.Close()
	close(c.done)
}

var (
	errConnClosed  = errors.New("http2: connection closed")
	errStreamReset = errors.New("http2: stream reset")
	errStall       = errors.New("http2: stream stalled without flow-control credit")
)

// drain starts a graceful close: a GOAWAY names the last stream served, and the connection
// closes when its streams are done.
func (c *conn) drain() {
	c.mu.Lock()
	if c.goingAway || c.closed {
		c.mu.Unlock()
		return
	}
	c.goingAway = true
	c.goAwayID = c.maxStreamID
	idle := len(c.streams) == 0
	c.mu.Unlock()
	c.lockW()
	_ = c.unlockW(c.fr.WriteGoAway(c.goAwayID, http2.ErrCodeNo, nil))
	if idle {
		_ = c.nc.SetReadDeadline(time.Now()) // the read loop ends; the connection closes
	}
}

// armIdle starts the idle timer once the first stream ends.
func (c *conn) armIdleLocked() {
	d := c.srv.cfg.IdleTimeout
	if d <= 0 {
		return
	}
	if c.idleTimer == nil {
		c.idleSeen = c.ended
		c.idleTimer = time.AfterFunc(d, c.onIdle)
	}
}

// onIdle closes the connection if no stream was open or ended since the timer's last check,
// else waits another IdleTimeout. Streams only count up (no clock read per stream), so an idle
// connection closes between one and two IdleTimeouts after its last stream.
func (c *conn) onIdle() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if len(c.streams) > 0 || c.ended != c.idleSeen {
		c.idleSeen = c.ended
		c.idleTimer.Reset(c.srv.cfg.IdleTimeout)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.drain()
}

// signalWindowLocked wakes the streams waiting for send credit.
func (c *conn) signalWindowLocked() {
	if c.winCh != nil {
		close(c.winCh)
		c.winCh = nil
	}
}

// streamEnded removes a stream whose handler returned and whose response is complete or reset.
// A stream whose response is complete while the client is still sending its request drains
// instead: it stays until the request ends or is judged (see stream.draining), at most
// drainGrace. A complete response's writer calls it with wmu held, before the END_STREAM is
// flushed (see responseWriter.send); a reset stream's worker calls it once the handler has
// returned, so that a reset stream keeps its concurrency slot until then (rapid reset).
func (c *conn) streamEnded(st *stream, reset bool) {
	c.mu.Lock()
	if !reset {
		c.completed++
	}
	c.ended++
	c.armIdleLocked()
	if !reset && !st.remoteClosed && !st.reset && !c.closed {
		st.draining = true
		st.drainTimer = time.AfterFunc(drainGrace, func() { c.stopDrain(st) })
		c.mu.Unlock()
		return
	}
	delete(c.streams, st.id)
	if !reset {
		c.gone.noteEnded(st.id) // a reset noted it already
	}
	drained := c.drainedLocked()
	c.mu.Unlock()
	if drained {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// drainGrace bounds how long a stream whose response is complete waits for the rest of its
// request: then the client is told to stop with RST_STREAM(NO_ERROR) (RFC 9113 §8.1), and the
// stream's slot is free. Frames a client sends right behind its header block (as h2spec does)
// arrive well within it.
const drainGrace = time.Second

// stopDrain resets a draining stream whose client sent nothing more within drainGrace.
func (c *conn) stopDrain(st *stream) {
	c.mu.Lock()
	live := st.draining && !c.closed && c.streams[st.id] == st
	c.mu.Unlock()
	if live {
		c.reset(st.id, http2.ErrCodeNo, false) // unless reset meanwhile
	}
}

// retireLocked removes a draining stream once its request side closed (END_STREAM, or a reset
// either way; the caller notes which). It reports whether that was the last stream of a
// connection going away, whose read loop may then end. Called with mu held.
func (c *conn) retireLocked(st *stream) bool {
	if !st.draining || c.streams[st.id] != st {
		return false
	}
	st.draining = false
	st.drainTimer.Stop()
	delete(c.streams, st.id)
	c.ended++
	return c.drainedLocked()
}

// drainedLocked reports whether a graceful drain has no stream left, so that its read loop may
// end now (by a read deadline).
func (c *conn) drainedLocked() bool { return c.goingAway && !c.failed && len(c.streams) == 0 }

// handler runs a request; net/http's server context key lets handlers abort with
// http.ErrAbortHandler, which resets the stream.
func (c *conn) runHandler(st *stream, r *http.Request) {
	w := &st.w
	aborted := false
	func() {
		defer func() {
			if p := recover(); p != nil {
				aborted = true
				if p != http.ErrAbortHandler { //nolint:errorlint // a panic value, compared as net/http does
					c.srv.cfg.Log.Error("handler panic", zap.Any("panic", p), zap.Stack("stack"))
				}
			}
		}()
		c.srv.cfg.Handler.ServeHTTP(w, r)
	}()
	reset := aborted
	if aborted {
		c.resetStream(st, http2.ErrCodeInternal)
	} else if err := w.finish(); err != nil {
		reset = true
	}
	c.busy.Add(-1)
	st.body.closeRead()
	st.cancel()
	if hook := c.srv.cfg.testHookHandlerDone; hook != nil {
		hook(st.id)
	}
	if !w.ended {
		c.streamEnded(st, reset)
	}
}
