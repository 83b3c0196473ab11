package h2server

import (
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// waitForgotten waits until the server's only connection has dropped stream id from its table
// (its handler returned and its bookkeeping is done), so that what a test sends next meets the
// closed-stream memory rather than the stream.
func waitForgotten(t *testing.T, s *Server, id uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		gone := len(s.conns) == 1
		for c := range s.conns {
			c.mu.Lock()
			gone = gone && c.streams[id] == nil
			c.mu.Unlock()
		}
		s.mu.Unlock()
		if gone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %d still in the table", id)
		}
		time.Sleep(time.Millisecond)
	}
}

// fence sends a PING and reads up to its acknowledgement, handing every other frame to check:
// the server answers frames in order, so whatever it had to say about the frames sent before
// the PING has been read by then.
func (c *rawClient) fence(check func(http2.Frame)) {
	c.t.Helper()
	if err := c.fr.WritePing(false, [8]byte{'f', 'e', 'n', 'c', 'e'}); err != nil {
		c.t.Fatal(err)
	}
	c.until("PING ack", func(f http2.Frame) bool {
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == [8]byte{'f', 'e', 'n', 'c', 'e'} {
			return true
		}
		check(f)
		return false
	})
}

// served checks that the connection still serves: a GET on id is answered.
func (c *rawClient) served(id uint32) {
	c.t.Helper()
	c.request(id, true)
	c.until("the response to the next stream", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			c.t.Fatalf("GOAWAY %s", f.ErrCode)
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				c.t.Fatalf("RST_STREAM %s on the next stream", f.ErrCode)
			}
		}
		h, ok := f.(*http2.HeadersFrame)
		return ok && h.StreamID == id
	})
}

// TestFramesOnClosedStreams: a frame on a stream the client may no longer send on is judged by
// how the stream closed (RFC 9113 §5.1, §6.1), whether the stream is still in the server's
// table (its handler running) or already forgotten.
func TestFramesOnClosedStreams(t *testing.T) {
	mark := hpack.HeaderField{Name: "x-mode", Value: "abort"}
	handler := func(release <-chan struct{}) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Header.Get("X-Mode") {
			case "abort":
				panic(http.ErrAbortHandler)
			case "block":
				<-release
			case "cancel":
				<-r.Context().Done()
			}
			_, _ = io.WriteString(w, "ok")
		})
	}
	noError := func(t *testing.T) func(http2.Frame) {
		return func(f http2.Frame) {
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				t.Fatalf("GOAWAY %s", f.ErrCode)
			case *http2.RSTStreamFrame:
				t.Fatalf("RST_STREAM %s on stream %d", f.ErrCode, f.StreamID)
			}
		}
	}
	// wantReset expects RST_STREAM(code) on id before the fence, and no GOAWAY.
	wantReset := func(t *testing.T, id uint32, code http2.ErrCode) (func(http2.Frame), func()) {
		seen := false
		return func(f http2.Frame) {
				switch f := f.(type) {
				case *http2.GoAwayFrame:
					t.Fatalf("GOAWAY %s, want RST_STREAM %s", f.ErrCode, code)
				case *http2.RSTStreamFrame:
					if f.StreamID != id || f.ErrCode != code || seen {
						t.Fatalf("RST_STREAM %s on stream %d, want one %s on %d", f.ErrCode, f.StreamID, code, id)
					}
					seen = true
				}
			}, func() {
				if !seen {
					t.Fatalf("no RST_STREAM %s on stream %d", code, id)
				}
			}
	}

	t.Run("DATA after the server's RST_STREAM is ignored and its window credited back", func(t *testing.T) {
		s, addr := serve(t, Config{Handler: handler(nil)})
		c := dialRaw(t, addr)
		if err := c.send(1, false, mark); err != nil {
			t.Fatal(err)
		}
		connWin := int64(65535)
		c.until("RST_STREAM INTERNAL_ERROR", func(f http2.Frame) bool {
			if wu, ok := f.(*http2.WindowUpdateFrame); ok && wu.StreamID == 0 {
				connWin += int64(wu.Increment)
			}
			rst, ok := f.(*http2.RSTStreamFrame)
			return ok && rst.StreamID == 1 && rst.ErrCode == http2.ErrCodeInternal
		})
		waitForgotten(t, s, 1)
		// The whole connection window, as a client that sent its body before it saw the reset.
		chunk := make([]byte, 16<<10)
		for sent := int64(0); sent+int64(len(chunk)) <= connWin; sent += int64(len(chunk)) {
			if err := c.fr.WriteData(1, false, chunk); err != nil {
				t.Fatal(err)
			}
		}
		credited := int64(0)
		c.fence(func(f http2.Frame) {
			noError(t)(f)
			if wu, ok := f.(*http2.WindowUpdateFrame); ok && wu.StreamID == 0 {
				credited += int64(wu.Increment)
			}
		})
		if credited < connWin/2 {
			t.Fatalf("%d bytes of the connection window credited back, want at least %d", credited, connWin/2)
		}
		c.served(3)
	})

	for _, forgotten := range []bool{false, true} {
		name := "in the table"
		if forgotten {
			name = "forgotten"
		}
		t.Run("DATA after the client's RST_STREAM is STREAM_CLOSED, "+name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			s, addr := serve(t, Config{Handler: handler(release)})
			c := dialRaw(t, addr)
			mode := "block" // the handler outlives the reset
			if forgotten {
				mode = "cancel"
			}
			if err := c.send(1, false, hpack.HeaderField{Name: "x-mode", Value: mode}); err != nil {
				t.Fatal(err)
			}
			c.fence(noError(t)) // the stream is open on the server
			if err := c.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
			if forgotten {
				waitForgotten(t, s, 1)
			}
			if err := c.fr.WriteData(1, true, []byte("late")); err != nil {
				t.Fatal(err)
			}
			check, done := wantReset(t, 1, http2.ErrCodeStreamClosed)
			c.fence(check)
			done()
			c.served(3)
		})
	}

	t.Run("DATA on a half-closed (remote) stream is STREAM_CLOSED", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		_, addr := serve(t, Config{Handler: handler(release)})
		c := dialRaw(t, addr)
		c.request(1, true, hpack.HeaderField{Name: "x-mode", Value: "block"})
		if err := c.fr.WriteData(1, false, []byte("late")); err != nil {
			t.Fatal(err)
		}
		check, done := wantReset(t, 1, http2.ErrCodeStreamClosed)
		c.fence(check)
		done()
		c.served(3)
	})

	t.Run("DATA after END_STREAM both ways is a connection error STREAM_CLOSED", func(t *testing.T) {
		s, addr := serve(t, Config{Handler: handler(nil)})
		c := dialRaw(t, addr)
		c.request(1, true)
		c.until("the response's END_STREAM", func(f http2.Frame) bool {
			d, ok := f.(*http2.DataFrame)
			return ok && d.StreamID == 1 && d.StreamEnded()
		})
		waitForgotten(t, s, 1)
		if err := c.fr.WriteData(1, false, []byte("late")); err != nil {
			t.Fatal(err)
		}
		c.goAway(http2.ErrCodeStreamClosed)
	})

	t.Run("DATA behind a refused stream's header is ignored", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		_, addr := serve(t, Config{MaxConcurrentStreams: 1, Handler: handler(release)})
		c := dialRaw(t, addr)
		c.request(1, true, hpack.HeaderField{Name: "x-mode", Value: "block"})
		if err := c.send(3, false); err != nil {
			t.Fatal(err)
		}
		if err := c.fr.WriteData(3, true, []byte("body")); err != nil {
			t.Fatal(err)
		}
		check, done := wantReset(t, 3, http2.ErrCodeRefusedStream)
		c.fence(check)
		done()
	})

	t.Run("trailers after the server's RST_STREAM are ignored", func(t *testing.T) {
		s, addr := serve(t, Config{Handler: handler(nil)})
		c := dialRaw(t, addr)
		if err := c.send(1, false, mark); err != nil {
			t.Fatal(err)
		}
		c.until("RST_STREAM INTERNAL_ERROR", func(f http2.Frame) bool {
			rst, ok := f.(*http2.RSTStreamFrame)
			return ok && rst.StreamID == 1
		})
		waitForgotten(t, s, 1)
		c.hbuf.Reset()
		_ = c.henc.WriteField(hpack.HeaderField{Name: "x-trailer", Value: "late"})
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		c.fence(noError(t))
		c.served(3)
	})
}

// TestNoRefusalAtLimitAfterEndStream: a client at MAX_CONCURRENT_STREAMS that opens its next
// stream the moment it reads the last one's END_STREAM is served, not refused, even while the
// last stream's worker has not finished its bookkeeping (held here by the test hook): a stream
// closed both ways no longer counts (RFC 9113 §5.1.2).
func TestNoRefusalAtLimitAfterEndStream(t *testing.T) {
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	defer close(hold)
	_, addr := serve(t, Config{MaxConcurrentStreams: 1, testHookHandlerDone: func(id uint32) {
		if id == 1 {
			held <- struct{}{}
			<-hold
		}
	}, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})})
	c := dialRaw(t, addr)
	c.request(1, true)
	c.until("stream 1's END_STREAM", func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamID == 1 && d.StreamEnded()
	})
	<-held // stream 1's worker is past its handler, not yet done
	c.request(3, true)
	c.until("stream 3's END_STREAM", func(f http2.Frame) bool {
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			t.Fatalf("RST_STREAM %s on stream %d: a compliant client was refused", rst.ErrCode, rst.StreamID)
		}
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamID == 3 && d.StreamEnded()
	})
}
