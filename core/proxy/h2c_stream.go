package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2cStream is one request on an h2cConn. The handler goroutine that opened it waits for the
// response header and drains the response body; a second goroutine sends the request body, if
// any; the connection's readLoop fills in the response.
type h2cStream struct {
	c  *h2cConn
	id uint32

	sendWindow int32       // under c.mu
	wclosed    atomic.Bool // END_STREAM or RST_STREAM written (set under c.wmu)
	dead       atomic.Bool // failed or finished: the body sender stops

	mu        sync.Mutex
	status    int
	header    []hpack.HeaderField // the response header's fields, read-only once gotHead
	trailer   []hpack.HeaderField // read-only once done
	gotHead   bool
	buf       []byte // received, not yet taken
	spare     []byte // the buffer taken last, given back
	recvAvail int32  // bytes the peer may still send before our next WINDOW_UPDATE
	unack     int32  // bytes consumed since the last WINDOW_UPDATE
	done      bool   // END_STREAM received
	err       error  // reset, or the connection failed, before done

	wake     chan struct{} // readLoop → handler
	sendWake chan struct{} // window updates → body sender
}

func newH2CStream(c *h2cConn) *h2cStream {
	return &h2cStream{c: c, recvAvail: h2cStreamWindow, wake: make(chan struct{}, 1),
		sendWake: make(chan struct{}, 1)}
}

func (s *h2cStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *h2cStream) wakeSender() {
	select {
	case s.sendWake <- struct{}{}:
	default:
	}
}

// fail ends a stream that has not completed with err.
func (s *h2cStream) fail(err error) {
	s.dead.Store(true)
	s.mu.Lock()
	if !s.done && s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.signal()
	s.wakeSender()
}

// onHeaders takes the response header (informational ones are skipped) or the trailers.
func (s *h2cStream) onHeaders(f *http2.MetaHeadersFrame) {
	s.mu.Lock()
	if s.done || s.err != nil {
		s.mu.Unlock()
		return
	}
	if !s.gotHead {
		status, err := strconv.Atoi(f.PseudoValue("status"))
		switch {
		case err != nil || status < 100 || status > 999:
			s.mu.Unlock()
			s.c.resetStream(s.id, http2.ErrCodeProtocol, fmt.Errorf("%w: bad :status %q", errH2CProtocol, f.PseudoValue("status")))
			return
		case status < 200 && status != http.StatusSwitchingProtocols:
			s.mu.Unlock() // 1xx: the final header follows
			return
		}
		s.status, s.header, s.gotHead = status, f.RegularFields(), true
	} else {
		s.trailer = f.RegularFields()
	}
	if f.StreamEnded() {
		s.done = true
	}
	s.mu.Unlock()
	s.signal()
}

// addFields adds header fields to h under their canonical names (key maps a canonical name to the
// key to use), with one allocation for all the values.
func addFields(h http.Header, fields []hpack.HeaderField, key func(string) string) {
	if len(fields) == 0 {
		return
	}
	vals := make([]string, len(fields))
	for i, hf := range fields {
		k := key(canonicalH2(hf.Name))
		vals[i] = hf.Value
		if prev, ok := h[k]; ok {
			h[k] = append(prev[:len(prev):len(prev)], hf.Value)
			continue
		}
		h[k] = vals[i : i+1 : i+1]
	}
}

func sameKey(k string) string { return k }

// onData queues payload; n is the frame's flow-controlled length (padding included). It reports
// false when the stream takes no more data, and the caller credits the connection window.
func (s *h2cStream) onData(payload []byte, n int32, end bool) bool {
	s.mu.Lock()
	if s.done || s.err != nil || !s.gotHead {
		s.mu.Unlock()
		if !s.gotHead {
			s.c.resetStream(s.id, http2.ErrCodeProtocol, fmt.Errorf("%w: DATA before HEADERS", errH2CProtocol))
		}
		return false
	}
	if n > s.recvAvail {
		s.mu.Unlock()
		s.c.resetStream(s.id, http2.ErrCodeFlowControl, fmt.Errorf("%w: stream window exceeded", errH2CProtocol))
		return false
	}
	s.recvAvail -= n
	s.unack += n - int32(len(payload)) // padding counts as consumed at once
	s.buf = append(s.buf, payload...)
	if end {
		s.done = true
	}
	s.mu.Unlock()
	s.signal()
	return true
}

// awaitHeader waits for the response header, the stream's failure, or done (the caller's end).
func (s *h2cStream) awaitHeader(done <-chan struct{}) error {
	for {
		s.mu.Lock()
		got, err := s.gotHead, s.err
		s.mu.Unlock()
		switch {
		case got:
			return nil
		case err != nil:
			return err
		}
		select {
		case <-s.wake:
		case <-done:
			return errH2CCanceled
		}
	}
}

var errH2CCanceled = fmt.Errorf("h2c: request canceled")

// next waits for response body bytes and returns all that are buffered (the caller gives them
// back with consumed), and whether the body is complete.
func (s *h2cStream) next(done <-chan struct{}) (p []byte, end bool, err error) {
	for {
		s.mu.Lock()
		if len(s.buf) > 0 {
			p, s.buf, s.spare = s.buf, s.spare[:0], nil
			end = s.done
			s.mu.Unlock()
			return p, end, nil
		}
		end, err = s.done, s.err
		s.mu.Unlock()
		if end || err != nil {
			return nil, end, err
		}
		select {
		case <-s.wake:
		case <-done:
			return nil, false, errH2CCanceled
		}
	}
}

// more reports whether next would return at once (bytes buffered, or the stream has ended).
func (s *h2cStream) more() bool {
	s.mu.Lock()
	m := len(s.buf) > 0 || s.done || s.err != nil
	s.mu.Unlock()
	return m
}

// consumed gives p back for reuse and returns its bytes to the flow-control windows.
func (s *h2cStream) consumed(p []byte) {
	n := int32(len(p))
	s.mu.Lock()
	if s.spare == nil {
		s.spare = p[:0]
	}
	s.unack += n
	var update int32
	if !s.done && s.err == nil && s.unack >= h2cStreamWindow/4 {
		update, s.unack = s.unack, 0
		s.recvAvail += update
	}
	s.mu.Unlock()
	if update > 0 {
		id := s.id
		_ = s.c.write(func() error { return s.c.fr.WriteWindowUpdate(id, uint32(update)) })
	}
	s.c.credit(n)
}

// sendBody copies the request body into DATA frames within the peer's flow-control windows, and
// ends the stream (with the request's trailers, if any) at its end. A failing body resets the
// stream.
func (s *h2cStream) sendBody(body io.Reader, r *http.Request) {
	bp := h2cBufs.Get().(*[]byte)
	defer h2cBufs.Put(bp)
	buf := *bp
	c := s.c
	for {
		n, err := body.Read(buf)
		data := buf[:n]
		last := err == io.EOF && len(r.Trailer) == 0
		for len(data) > 0 {
			allowed, ok := s.awaitWindow(len(data))
			if !ok {
				return
			}
			chunk := data[:allowed]
			data = data[allowed:]
			end := last && len(data) == 0
			if c.write(func() error { return s.writeData(chunk, end) }) != nil {
				return
			}
			if end {
				return
			}
		}
		switch {
		case err == io.EOF:
			_ = c.write(func() error { return s.writeEnd(r.Trailer) })
			return
		case err != nil:
			c.resetStream(s.id, http2.ErrCodeCancel, fmt.Errorf("h2c: reading the request body: %w", err))
			return
		}
	}
}

var h2cBufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// writeData writes one DATA frame unless the stream was closed meanwhile (c.wmu held).
func (s *h2cStream) writeData(p []byte, end bool) error {
	if s.wclosed.Load() {
		return nil
	}
	if end {
		s.wclosed.Store(true)
	}
	return s.c.fr.WriteData(s.id, end, p)
}

// writeEnd ends the request: trailers, or an empty DATA frame with END_STREAM (c.wmu held).
func (s *h2cStream) writeEnd(trailer http.Header) error {
	if s.wclosed.Load() {
		return nil
	}
	s.wclosed.Store(true)
	if len(trailer) == 0 {
		return s.c.fr.WriteData(s.id, true, nil)
	}
	c := s.c
	c.hbuf.Reset()
	for k, vv := range trailer {
		name := lowerH2(k)
		for _, v := range vv {
			if validH2Field(name, v) {
				_ = c.henc.WriteField(hpackField(name, v))
			}
		}
	}
	return c.writeHeaderBlock(s.id, true)
}

// awaitWindow waits until up to want bytes may be sent and takes them from both windows.
func (s *h2cStream) awaitWindow(want int) (int32, bool) {
	c := s.c
	for {
		if s.dead.Load() {
			return 0, false
		}
		c.mu.Lock()
		if c.err != nil {
			c.mu.Unlock()
			return 0, false
		}
		n := min(int32(min(want, int(c.maxFrame))), s.sendWindow, c.sendWindow)
		if n > 0 {
			s.sendWindow -= n
			c.sendWindow -= n
			c.mu.Unlock()
			return n, true
		}
		c.mu.Unlock()
		<-s.sendWake // fail and finish wake it too, after setting dead
	}
}

// finish is the handler's last word on the stream: a stream not complete both ways is reset (the
// client went away, or the upstream answered before the request was sent whole), bytes nobody
// will read go back to the connection window, and the stream slot is released.
func (s *h2cStream) finish() {
	s.dead.Store(true)
	s.wakeSender()
	c := s.c
	c.forget(s)
	s.mu.Lock()
	complete, failed, left := s.done, s.err != nil, len(s.buf)
	s.buf = nil
	s.mu.Unlock()
	if !failed && (!complete || !s.wclosed.Load()) {
		_ = c.write(func() error {
			if complete && s.wclosed.Load() {
				return nil
			}
			s.wclosed.Store(true)
			return c.fr.WriteRSTStream(s.id, http2.ErrCodeCancel)
		})
	}
	c.credit(int32(left))
	c.release()
}
