package h1server

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1wire"
)

// Body is a request body read off the connection: exactly Content-Length bytes, or chunks (with
// chunkedBodyReader, strict RFC 9112 framing) followed by a trailer section that is validated and dropped. On
// the first read of a request that expects it, "100 Continue" is sent.
//
// The stdlib transport reads a body from its own goroutine and may still be reading when the
// handler has returned (an upstream that answered early), so reads are serialised and end with
// the handler (close), as net/http's are; and the 100 Continue, written from that goroutine, is
// ordered against the response (noContinue).
type Body struct {
	c         *conn
	mu        sync.Mutex
	remaining int64     // Content-Length framing: bytes left
	chunks    io.Reader // chunked framing, nil otherwise
	expect    atomic.Bool
	cmu       sync.Mutex // held while the 100 Continue is written
	expected  bool       // the request asked for 100 Continue
	continued bool       // and got it (under cmu)
	done      bool
	closed    bool      // the handler returned
	dl        time.Time // the read deadline while the body is read; zero when none
	err       error
}

var errBodyInterrupted = errors.New("request body read interrupted when the handler returned")

func (b *Body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	return b.read(p)
}

func (b *Body) read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	if b.expect.Load() && !b.sendContinue() {
		return 0, b.err
	}
	if !b.dl.IsZero() && b.c.br.Buffered() == 0 {
		b.rearm()
	}
	var n int
	var err error
	if b.chunks != nil {
		n, err = b.chunks.Read(p)
		if errors.Is(err, io.EOF) {
			err = b.trailers()
		}
	} else {
		if int64(len(p)) > b.remaining {
			p = p[:b.remaining]
		}
		n, err = b.c.br.Read(p)
		b.remaining -= int64(n)
		if b.remaining == 0 {
			b.done, err = true, io.EOF
		} else if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	if b.done && !b.closed {
		// Read whole while the handler runs: from now on the client is watched. (This may be a
		// transport's goroutine; serve closes the body, under mu, before it disarms the watch.)
		b.c.watchClient()
	}
	return n, err
}

// trailers reads the trailer section after the last chunk with the same field checks as the header.
func (b *Body) trailers() error {
	err := readTrailers(&b.c.trailer, b.c.br, b.c.srv.maxHeader) // scratch reused across requests
	if errors.Is(err, io.EOF) {
		b.done = true
	}
	return err
}

// readTrailers reads a trailer section up to its empty line (io.EOF) into h's buffer, under the
// header size limit; a malformed field is a 400, a short or overlong section io.ErrUnexpectedEOF.
func readTrailers(h *reqHead, br *bufio.Reader, limit int) error {
	h.raw = h.raw[:0]
	for {
		s, e, err := h.readLine(br, limit)
		if err != nil {
			return io.ErrUnexpectedEOF
		}
		if s == e {
			return io.EOF
		}
		if _, err := h1wire.ParseField(h.raw, s, e); err != nil {
			return badRequest("malformed trailer field")
		}
	}
}

// rearm pushes the read deadline out by the body timeout before a read that will wait for the
// socket, lazily: only when less than half of it is left, so a body that arrives briskly costs no
// timer operation beyond the first.
func (b *Body) rearm() {
	wait := b.c.srv.bodyWait
	if now := time.Now(); b.dl.Sub(now) < wait/2 {
		b.dl = now.Add(wait)
		_ = b.c.nc.SetReadDeadline(b.dl)
	}
}

// sendContinue writes "100 Continue" unless the response got there first; false on a write error.
func (b *Body) sendContinue() bool {
	b.cmu.Lock()
	defer b.cmu.Unlock()
	if !b.expect.Load() {
		return true
	}
	b.continued = true // before expect turns false: noContinue's callers read it after
	b.expect.Store(false)
	if _, err := b.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err == nil {
		err = b.c.bw.Flush()
		if err != nil {
			b.err = err
			return false
		}
	}
	return true
}

// noContinue is called before the response is written: no 100 Continue may follow it. It reports
// whether the client, asked to wait for one, never got it (so it may or may not send the body).
func (b *Body) noContinue() (unmet bool) {
	if b.expect.Load() {
		b.cmu.Lock()
		b.expect.Store(false)
		b.cmu.Unlock()
	}
	return b.expected && !b.continued
}

func (b *Body) Close() error { return nil }

// close ends reads by anyone but the serving goroutine, after the handler returned. A read still
// under way is interrupted by a read deadline in the past; the body's end is then unknown and the
// connection closes.
func (b *Body) close() {
	if !b.mu.TryLock() {
		_ = b.c.nc.SetReadDeadline(aLongTimeAgo)
		b.mu.Lock()
		if b.err == nil {
			b.err = errBodyInterrupted
		}
	}
	b.closed = true
	b.mu.Unlock()
}

// bodyDrain reads a closed body for the serving goroutine.
type bodyDrain Body

func (d *bodyDrain) Read(p []byte) (int, error) { return (*Body)(d).read(p) }

// drain reads what the handler left of the body, up to max bytes, so the connection can carry the
// next request; it reports whether it got to the end.
func (b *Body) drain(max int64) bool {
	if b.err != nil {
		return false
	}
	if b.done {
		return true
	}
	if b.expected && !b.continued {
		// The client waits for "100 Continue" before sending the body, or may send it anyway:
		// only closing leaves no doubt about what comes next.
		return false
	}
	if b.chunks == nil && b.remaining > max {
		// A declared length beyond the limit: reading max bytes of it first changes nothing.
		return false
	}
	n, err := io.CopyN(io.Discard, (*bodyDrain)(b), max+1)
	return n <= max && errors.Is(err, io.EOF)
}

func (b *Body) reset(c *conn, h *reqHead) {
	b.c, b.remaining, b.chunks = c, h.length, nil
	b.expected, b.continued, b.done, b.closed, b.err = h.expect, false, false, false, nil
	if h.chunked {
		b.chunks = h1wire.NewChunkedReader(c.br)
	} else if h.length <= 0 {
		b.done, b.expected = true, false
	}
	b.expect.Store(b.expected)
}

// requestBody is the Body a request gets: NoBody when it has none, as net/http does.
func requestBody(b *Body, h *reqHead) io.ReadCloser {
	if !h.chunked && h.length <= 0 {
		return http.NoBody
	}
	return b
}

// Ready reports whether more of the body can be read without waiting: bytes are buffered, or
// the socket has some (or its end) to give.
func (b *Body) Ready() bool { return b.c.clientReady() }
