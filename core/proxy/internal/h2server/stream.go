package h2server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
)

// stream is one request and its response. The fields under "mu" are guarded by the
// connection's mu.
type stream struct {
	c      *conn
	id     uint32
	ctx    context.Context
	cancel context.CancelFunc

	// mu
	sendWin      int64 // what the server may still send
	recvWin      int64 // what the client may still send
	recvUnacked  int64 // read by the handler, not yet returned by WINDOW_UPDATE
	remoteClosed bool  // END_STREAM or RST_STREAM received, or reset sent
	reset        bool  // RST_STREAM sent or received
	clientReset  bool  // RST_STREAM received
	// draining: the handler returned and the response is complete, but the client's side is
	// still open. The stream stays in the table (it holds its concurrency slot, as the client
	// counts it open) and the read loop keeps judging its frames until the request ends, a
	// frame is wrong, or drainTimer tells the client to stop (see conn.retireLocked).
	draining   bool
	drainTimer *time.Timer

	// responded: END_STREAM of the response is written, set before the frame is flushed, so a
	// client that saw it and sends on the stream again finds it closed (a connection error, not
	// the stream error of a half-closed stream: h2spec http2/5.1/12). With remoteClosed, the
	// stream is closed.
	responded atomic.Bool

	// watchFn runs when the stream is aborted while watchState is watchArmed (WatchReset).
	watchFn    func()
	watchState atomic.Int32

	declLen int64 // Content-Length, -1 unknown
	gotLen  int64 // DATA payload received (read loop only)

	body reqBody
	w    responseWriter
}

func (c *conn) newStreamLocked(id uint32, endStream bool) *stream {
	st := &stream{c: c, id: id, sendWin: c.peerWin, recvWin: streamWindow, remoteClosed: endStream}
	st.ctx, st.cancel = context.WithCancel(c.ctx)
	st.body.st = st
	st.body.cond.L = &st.body.mu
	if endStream {
		st.body.err = io.EOF
	}
	st.w.st = st
	c.streams[id] = st
	return st
}

// abort fails the stream's body and writer with err, cancels its context and runs the watch
// function, if armed: the handler and the upstream request it made see the client go away.
func (st *stream) abort(err error) {
	st.body.fail(err)
	st.cancel()
	if st.watchState.Swap(watchFired) == watchArmed {
		st.watchFn()
	}
}

// The states of a stream's reset watch (WatchReset).
const (
	watchIdle int32 = iota
	watchArming
	watchArmed
	watchFired // the stream was aborted: no watch arms again
)

// WatchReset arranges for abort to run once, when the stream is reset or its connection closes,
// until stop is called; stop reports whether it disarmed the watch before abort started (false:
// abort ran or is running). It is what context.AfterFunc on the request's context would do,
// without the context's registration, Done channel and goroutine; abort runs in the goroutine
// that aborts the stream and must not block. ok is false, and nothing is armed, when r's context
// is not the stream's own (a handler derived one with a deadline of its own: only an AfterFunc
// on it sees that end too) or the stream is aborted already.
func (w *responseWriter) WatchReset(r *http.Request, abort func()) (stop func() bool, ok bool) {
	st := w.st
	if r.Context() != st.ctx {
		return nil, false
	}
	// watchFn is written only in the arming state and read only by the abort that finds the
	// watch armed: the two never overlap.
	if !st.watchState.CompareAndSwap(watchIdle, watchArming) {
		return nil, false
	}
	st.watchFn = abort
	if !st.watchState.CompareAndSwap(watchArming, watchArmed) {
		return nil, false // aborted meanwhile
	}
	return st.unwatch, true
}

func (st *stream) unwatch() bool { return st.watchState.CompareAndSwap(watchArmed, watchIdle) }

func (c *conn) onData(f *http2.DataFrame) error {
	id := f.StreamID
	n := int64(f.Length) // flow control counts padding too
	data := f.Data()
	if len(data) == 0 && !f.StreamEnded() {
		if err := c.flood.count(); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if n > c.recvWinLocked() {
		c.mu.Unlock()
		return connError{http2.ErrCodeFlowControl, "DATA beyond the connection window"}
	}
	c.recvTaken += n
	st := c.streams[id]
	if st == nil || st.remoteClosed {
		idle := st == nil && id > c.maxStreamID
		var how closedHow
		if !idle {
			how = c.closedHowLocked(st, id)
		}
		c.mu.Unlock()
		if idle {
			return connError{http2.ErrCodeProtocol, "DATA on an idle stream"}
		}
		// Ignored or refused, the frame counted against the connection's window (RFC 9113
		// §5.1, §6.9): nobody reads it, so its credit goes back now.
		c.credit(nil, n)
		return frameOnClosed(how, id, "DATA")
	}
	if n > st.recvWin {
		c.mu.Unlock()
		c.credit(nil, n)
		return streamError{id, http2.ErrCodeFlowControl}
	}
	st.recvWin -= n
	draining := st.draining
	c.mu.Unlock()
	if len(data) > 0 {
		c.recvWork++
	}
	st.gotLen += int64(len(data))
	if st.declLen >= 0 && (st.gotLen > st.declLen || f.StreamEnded() && st.gotLen != st.declLen) {
		c.credit(nil, n)
		return streamError{id, http2.ErrCodeProtocol}
	}
	if pad := n - int64(len(data)); pad > 0 {
		c.credit(st, pad)
	}
	if len(data) > 0 && !st.body.write(data) {
		c.credit(nil, int64(len(data))) // the handler closed the body: nobody reads it
	}
	if f.StreamEnded() {
		if err := c.endRemote(st); err != nil {
			return err
		}
		st.body.finish(nil)
		return nil
	}
	if draining {
		// The response is complete and nobody reads the body: the client may stop sending it
		// (RFC 9113 §8.1). This chunk was valid, so the reset says NO_ERROR.
		return streamError{id, http2.ErrCodeNo}
	}
	return nil
}

// endRemote marks the client's side of the stream closed; a draining stream is closed now.
func (c *conn) endRemote(st *stream) error {
	c.mu.Lock()
	st.remoteClosed = true
	retired := c.streams[st.id] == st && st.draining
	drained := c.retireLocked(st)
	if retired {
		c.gone.noteEnded(st.id)
	}
	c.mu.Unlock()
	if drained {
		_ = c.nc.SetReadDeadline(time.Now())
	}
	return nil
}

// credit returns n bytes of receive window: to the connection, and to st when not nil. A
// WINDOW_UPDATE goes out once half a window is owed, so that a stream of small reads does not
// cost a frame each.
func (c *conn) credit(st *stream, n int64) {
	var connInc, streamInc int64
	c.mu.Lock()
	c.recvUnacked += n
	if c.recvUnacked >= connWindow/2 {
		connInc = c.recvUnacked
		c.recvTaken -= connInc
		c.recvUnacked = 0
	}
	if st != nil && !st.remoteClosed {
		st.recvUnacked += n
		if st.recvUnacked >= streamWindow/2 {
			streamInc = st.recvUnacked
			st.recvWin += streamInc
			st.recvUnacked = 0
		}
	}
	closed := c.closed
	c.mu.Unlock()
	if closed || connInc == 0 && streamInc == 0 {
		return
	}
	c.lockW()
	var err error
	if connInc > 0 {
		err = c.fr.WriteWindowUpdate(0, uint32(connInc))
	}
	if streamInc > 0 && err == nil {
		err = c.fr.WriteWindowUpdate(st.id, uint32(streamInc))
	}
	_ = c.unlockW(err)
}

// recvWinLocked is what the client may still send on the connection.
func (c *conn) recvWinLocked() int64 { return connWindow - c.recvTaken }

// reqBody is a request body: the read loop appends DATA payloads, the handler reads them. It
// holds at most the stream's window.
type reqBody struct {
	st     *stream
	req    *http.Request
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	off    int
	err    error // io.EOF at END_STREAM, or why the stream failed
	closed bool  // the handler closed it
	// trailer is what the client sent after the body, until the reader reaches EOF.
	trailer http.Header
}

var errBadLength = errors.New("http2: bad content-length")

func (b *reqBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	for b.off == len(b.buf) && b.err == nil && !b.closed {
		b.cond.Wait()
	}
	if b.closed {
		b.mu.Unlock()
		return 0, http.ErrBodyReadAfterClose
	}
	if b.off == len(b.buf) {
		err := b.err
		if err == io.EOF && b.trailer != nil { //nolint:errorlint // the sentinel itself
			b.copyTrailer()
		}
		b.mu.Unlock()
		return 0, err
	}
	n := copy(p, b.buf[b.off:])
	b.off += n
	if b.off == len(b.buf) {
		b.buf, b.off = b.buf[:0], 0
	}
	b.mu.Unlock()
	b.st.c.credit(b.st, int64(n))
	return n, nil
}

// Whole reports, without blocking, whether the whole body has arrived (the client's END_STREAM
// came, without trailers) and how many bytes of it are left to read: then reads up to EOF do not
// wait. A forwarder sends such a body with the request's header rather than stream it from a
// goroutine of its own.
func (b *reqBody) Whole() (n int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.err != io.EOF || b.trailer != nil { //nolint:errorlint // the sentinel itself
		return 0, false
	}
	return len(b.buf) - b.off, true
}

// Close discards what is buffered; later DATA is dropped as it arrives.
func (b *reqBody) Close() error {
	b.closeRead()
	return nil
}

func (b *reqBody) closeRead() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	unread := len(b.buf) - b.off
	b.buf, b.off = nil, 0
	b.cond.Broadcast()
	b.mu.Unlock()
	if unread > 0 {
		b.st.c.credit(nil, int64(unread))
	}
}

// write appends a DATA payload; false if the handler closed the body.
func (b *reqBody) write(p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.err != nil {
		return false
	}
	b.buf = append(b.buf, p...)
	b.cond.Signal()
	return true
}

// copyTrailer hands the trailers to the request once its reader reaches EOF, in the reader's
// goroutine: the handler may read (or clone) the request's Trailer map until then. Called
// with mu held.
func (b *reqBody) copyTrailer() {
	if b.req != nil {
		if b.req.Trailer == nil {
			b.req.Trailer = make(http.Header, len(b.trailer))
		}
		for k, v := range b.trailer {
			b.req.Trailer[k] = v
		}
	}
	b.trailer = nil
}

// finish ends the body at END_STREAM, with the trailers if any (see copyTrailer).
func (b *reqBody) finish(trailer http.Header) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return
	}
	b.trailer = trailer
	b.err = io.EOF
	b.cond.Broadcast()
}

// fail ends the body with err; a body already complete stays readable.
func (b *reqBody) fail(err error) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.cond.Broadcast()
	b.mu.Unlock()
	b.st.w.fail(err)
}
