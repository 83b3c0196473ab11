package h2client

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"

	"golang.org/x/net/http2"
)

// open starts a stream on c: it takes the next stream ID and writes the request's HEADERS frame
// (fields by header) in one step under the write lock, as stream IDs must reach the peer in
// increasing order. With end, body follows in DATA frames and END_STREAM closes the request, in
// the same step as far as the peer's windows allow; the rest, if any, is copied and sent by a
// goroutine as the windows open.
func (c *conn) open(header func(add func(name, value string)), body []byte, end bool) (*Stream, error) {
	s := newStream(c)
	c.opened.Add(1) // before the write, whose flush decision counts this stream
	var openErr error
	var rest []byte
	err := c.write(func() error {
		c.mu.Lock()
		if c.err != nil || c.goaway || c.nextID >= 1<<31-2 {
			openErr = ErrGoAway
			c.mu.Unlock()
			return nil
		}
		s.id = c.nextID
		c.nextID += 2
		s.sendWindow = c.initWindow
		c.streams[s.id] = s
		// The body's share of the windows is taken with the ID: nothing else can have claimed
		// this stream's, and the connection's is spent in write order.
		n := int32(0)
		if end && len(body) > 0 {
			n = min(int32(min(len(body), 1<<30)), s.sendWindow, c.sendWindow) //nolint:gosec // bounded
			n = max(n, 0)
			s.sendWindow -= n
			c.sendWindow -= n
		}
		maxFrame := int(c.maxFrame)
		c.mu.Unlock()
		c.hbuf.Reset()
		header(func(name, value string) { _ = c.henc.WriteField(hpackField(name, value)) })
		whole := end && int(n) == len(body)
		if end && len(body) == 0 {
			s.wclosed.Store(true)
			return c.writeHeaderBlock(s.id, true)
		}
		if err := c.writeHeaderBlock(s.id, false); err != nil {
			return err
		}
		for p := body[:n]; len(p) > 0; {
			k := min(len(p), maxFrame)
			last := whole && k == len(p)
			if last {
				s.wclosed.Store(true)
			}
			if err := c.fr.WriteData(s.id, last, p[:k]); err != nil {
				return err
			}
			p = p[k:]
		}
		if end && !whole {
			rest = bytes.Clone(body[n:])
		}
		return nil
	})
	if openErr == nil && err == nil {
		if rest != nil {
			go s.SendBody(bytes.NewReader(rest), nil)
		}
		return s, nil
	}
	c.opened.Add(-1)
	if openErr != nil {
		return nil, openErr
	}
	return nil, err
}

// writeHeaderBlock writes c.hbuf as HEADERS and, past the peer's frame size, CONTINUATION frames
// (c.wmu held).
func (c *conn) writeHeaderBlock(id uint32, endStream bool) error {
	block := c.hbuf.Bytes()
	c.mu.Lock()
	maxFrame := int(c.maxFrame)
	c.mu.Unlock()
	first := block[:min(len(block), maxFrame)]
	block = block[len(first):]
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndStream: endStream, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		frag := block[:min(len(block), maxFrame)]
		block = block[len(frag):]
		err = c.fr.WriteContinuation(id, len(block) == 0, frag)
	}
	return err
}

// SendBody copies a request body still arriving into DATA frames within the peer's flow-control
// windows, and ends the stream at its end, with trailer's fields (trailer is called once the
// body has reached EOF; nil or an empty header: none). A failing body resets the stream. It is
// meant to run in a goroutine of its own, for streams opened without end.
func (s *Stream) SendBody(body io.Reader, trailer func() http.Header) {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	buf := *bp
	c := s.c
	for {
		n, err := body.Read(buf)
		data := buf[:n]
		var tr http.Header
		if err == io.EOF && trailer != nil {
			tr = trailer()
		}
		last := err == io.EOF && len(tr) == 0
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
			_ = c.write(func() error { return s.writeEnd(tr) })
			return
		case err != nil:
			c.resetStream(s.id, http2.ErrCodeCancel, fmt.Errorf("h2c: reading the request body: %w", err))
			return
		}
	}
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// writeData writes one DATA frame unless the stream was closed meanwhile (c.wmu held).
func (s *Stream) writeData(p []byte, end bool) error {
	if s.wclosed.Load() {
		return nil
	}
	if end {
		s.wclosed.Store(true)
	}
	return s.c.fr.WriteData(s.id, end, p)
}

// writeEnd ends the request: trailers, or an empty DATA frame with END_STREAM (c.wmu held).
func (s *Stream) writeEnd(trailer http.Header) error {
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
		name := LowerName(k)
		for _, v := range vv {
			if ValidField(name, v) {
				_ = c.henc.WriteField(hpackField(name, v))
			}
		}
	}
	return c.writeHeaderBlock(s.id, true)
}

// awaitWindow waits until up to want bytes may be sent and takes them from both windows.
func (s *Stream) awaitWindow(want int) (int32, bool) {
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
		n := min(int32(min(want, int(c.maxFrame))), s.sendWindow, c.sendWindow) //nolint:gosec // bounded by maxFrame
		if n > 0 {
			s.sendWindow -= n
			c.sendWindow -= n
			c.mu.Unlock()
			return n, true
		}
		c.mu.Unlock()
		<-s.sendWake // fail and Finish wake it too, after setting dead
	}
}
