package h2client

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Stream is one request on a connection. The goroutine that opened it waits for the response
// header and drains the response body; SendBody, when the body is still arriving, runs in a
// goroutine of its own; the connection's read loop fills in the response.
type Stream struct {
	c  *conn
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

	wake     chan struct{} // read loop → caller
	sendWake chan struct{} // window updates → body sender
}

func newStream(c *conn) *Stream {
	return &Stream{c: c, recvAvail: streamWindow, wake: make(chan struct{}, 1), sendWake: make(chan struct{}, 1)}
}

func (s *Stream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Stream) wakeSender() {
	select {
	case s.sendWake <- struct{}{}:
	default:
	}
}

// fail ends a stream that has not completed with err.
func (s *Stream) fail(err error) {
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
func (s *Stream) onHeaders(f *http2.MetaHeadersFrame) {
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
			s.c.resetStream(s.id, http2.ErrCodeProtocol, fmt.Errorf("%w: bad :status %q", ErrProtocol, f.PseudoValue("status")))
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

// onData queues payload; n is the frame's flow-controlled length (padding included). It reports
// false when the stream takes no more data, and the caller credits the connection window.
func (s *Stream) onData(payload []byte, n int32, end bool) bool {
	s.mu.Lock()
	if s.done || s.err != nil || !s.gotHead {
		s.mu.Unlock()
		if !s.gotHead {
			s.c.resetStream(s.id, http2.ErrCodeProtocol, fmt.Errorf("%w: DATA before HEADERS", ErrProtocol))
		}
		return false
	}
	if n > s.recvAvail {
		s.mu.Unlock()
		s.c.resetStream(s.id, http2.ErrCodeFlowControl, fmt.Errorf("%w: stream window exceeded", ErrProtocol))
		return false
	}
	s.recvAvail -= n
	s.unack += n - int32(len(payload)) //nolint:gosec // at most a frame: padding counts as consumed at once
	s.buf = append(s.buf, payload...)
	if end {
		s.done = true
	}
	s.mu.Unlock()
	s.signal()
	return true
}

// AwaitHeader waits for the response header, the stream's failure, or done (the caller's end:
// ErrCanceled).
func (s *Stream) AwaitHeader(done <-chan struct{}) error {
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
			return ErrCanceled
		}
	}
}

// Status is the response's status code (once AwaitHeader returned nil).
func (s *Stream) Status() int { return s.status }

// Header is the response header's regular fields, as received (once AwaitHeader returned nil;
// read-only).
func (s *Stream) Header() []hpack.HeaderField { return s.header }

// Trailer is the response's trailer fields (once Next reported the end; read-only).
func (s *Stream) Trailer() []hpack.HeaderField { return s.trailer }

// Next waits for response body bytes and returns all that are buffered (give them back with
// Consumed), and whether the body is complete. done ends the wait with ErrCanceled.
func (s *Stream) Next(done <-chan struct{}) (p []byte, end bool, err error) {
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
			return nil, false, ErrCanceled
		}
	}
}

// More reports whether Next would return at once (bytes buffered, or the stream has ended).
func (s *Stream) More() bool {
	s.mu.Lock()
	m := len(s.buf) > 0 || s.done || s.err != nil
	s.mu.Unlock()
	return m
}

// Consumed gives p (from Next) back for reuse and returns its bytes to the flow-control windows.
func (s *Stream) Consumed(p []byte) {
	n := int32(len(p)) //nolint:gosec // bounded by the stream window
	s.mu.Lock()
	if s.spare == nil {
		s.spare = p[:0]
	}
	s.unack += n
	var update int32
	if !s.done && s.err == nil && s.unack >= streamWindow/4 {
		update, s.unack = s.unack, 0
		s.recvAvail += update
	}
	s.mu.Unlock()
	if update > 0 {
		id := s.id
		_ = s.c.write(func() error { return s.c.fr.WriteWindowUpdate(id, uint32(update)) }) //nolint:gosec // positive
	}
	s.c.credit(n)
}

// Finish is the caller's last word on the stream: a stream not complete both ways is reset (the
// client went away, or the upstream answered before the request was sent whole), bytes nobody
// will read go back to the connection window, and the stream slot is released.
func (s *Stream) Finish() {
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
	c.opened.Add(-1)
	c.credit(int32(left)) //nolint:gosec // bounded by the stream window
	c.release()
}
