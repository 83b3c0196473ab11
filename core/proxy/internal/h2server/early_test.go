package h2server

import (
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// earlyResponder answers at once, without reading the request body: the response is complete
// while the client is still sending its request (RFC 9113 §8.1).
func earlyResponder() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
}

// awaitResponseEnd reads until the response of stream id has ended, failing on a RST_STREAM of it
// first.
func (c *rawClient) awaitResponseEnd(id uint32) {
	c.t.Helper()
	c.until("the response's END_STREAM", func(f http2.Frame) bool {
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == id {
			c.t.Fatalf("RST_STREAM %s before the response ended", rst.ErrCode)
		}
		return f.Header().StreamID == id && f.Header().Flags.Has(http2.FlagDataEndStream) &&
			(f.Header().Type == http2.FrameData || f.Header().Type == http2.FrameHeaders)
	})
}

// firstReset returns the code of the first RST_STREAM on stream id.
func (c *rawClient) firstReset(id uint32) http2.ErrCode {
	c.t.Helper()
	var code http2.ErrCode
	c.until("RST_STREAM", func(f http2.Frame) bool {
		rst, ok := f.(*http2.RSTStreamFrame)
		if ok && rst.StreamID == id {
			code = rst.ErrCode
		}
		return ok && rst.StreamID == id
	})
	return code
}

// post opens stream id with a POST request's header block, with extra fields.
func (c *rawClient) post(id uint32, extra ...hpack.HeaderField) {
	c.t.Helper()
	c.hbuf.Reset()
	for _, f := range append([]hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "example.com"}, {Name: ":path", Value: "/"}}, extra...) {
		_ = c.henc.WriteField(f)
	}
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true})
	if err != nil {
		c.t.Fatal(err)
	}
}

// awaitNoStreams waits until no connection of s has a stream in its table: every stream's
// concurrency slot was given back.
func awaitNoStreams(t *testing.T, s *Server) {
	t.Helper()
	open := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		n := 0
		for c := range s.conns {
			c.mu.Lock()
			n += len(c.streams)
			c.mu.Unlock()
		}
		return n
	}
	deadline := time.Now().Add(10 * time.Second)
	for open() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams still open", open())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFramesAfterEarlyResponseJudged: the response is complete (END_STREAM seen by the client)
// before the client sends the rest of its request. Frames that then arrive are still judged:
// a window overflow gets FLOW_CONTROL_ERROR, a body that does not match content-length gets
// PROTOCOL_ERROR (h2spec 6.9.1/3, 8.1.2.6/1-2, whose verdict used to depend on whether the
// handler answered before those frames arrived). A valid body chunk is told to stop with
// NO_ERROR, a valid END_STREAM closes the stream without a reset, and in every case the stream's
// slot is given back.
func TestFramesAfterEarlyResponseJudged(t *testing.T) {
	cl1 := []hpack.HeaderField{{Name: "content-length", Value: "1"}}
	cl4 := []hpack.HeaderField{{Name: "content-length", Value: "4"}}
	for _, tc := range []struct {
		name  string
		extra []hpack.HeaderField
		send  func(c *rawClient) error
		want  http2.ErrCode
		clean bool // no RST_STREAM at all: the request ended properly
	}{
		{name: "window overflow", send: func(c *rawClient) error {
			if err := c.fr.WriteWindowUpdate(1, maxWindow); err != nil {
				return err
			}
			return c.fr.WriteWindowUpdate(1, maxWindow)
		}, want: http2.ErrCodeFlowControl},
		{name: "content-length exceeded at END_STREAM", extra: cl1, send: func(c *rawClient) error {
			return c.fr.WriteData(1, true, []byte("test"))
		}, want: http2.ErrCodeProtocol},
		{name: "content-length exceeded over two frames", extra: cl1, send: func(c *rawClient) error {
			if err := c.fr.WriteData(1, false, []byte("test")); err != nil {
				return err
			}
			return c.fr.WriteData(1, true, []byte("test"))
		}, want: http2.ErrCodeProtocol},
		{name: "content-length short at END_STREAM", extra: cl4, send: func(c *rawClient) error {
			return c.fr.WriteData(1, true, []byte("te"))
		}, want: http2.ErrCodeProtocol},
		{name: "valid body chunk", send: func(c *rawClient) error {
			return c.fr.WriteData(1, false, []byte("test"))
		}, want: http2.ErrCodeNo},
		{name: "nothing more", send: func(*rawClient) error { return nil }, want: http2.ErrCodeNo},
		{name: "valid end", extra: cl4, send: func(c *rawClient) error {
			return c.fr.WriteData(1, true, []byte("test"))
		}, clean: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, addr := serve(t, Config{Handler: earlyResponder()})
			c := dialRaw(t, addr)
			c.post(1, tc.extra...)
			c.awaitResponseEnd(1)
			awaitIdle(t, srv, 1) // the handler has returned: the response's end is all done
			if err := tc.send(c); err != nil {
				t.Fatal(err)
			}
			if tc.clean {
				// The server reads frames in order: a reset for the END_STREAM would come
				// before the PING's answer.
				if err := c.fr.WritePing(false, [8]byte{1}); err != nil {
					t.Fatal(err)
				}
				c.until("the PING's answer", func(f http2.Frame) bool {
					if rst, ok := f.(*http2.RSTStreamFrame); ok {
						t.Fatalf("RST_STREAM %s on stream %d", rst.ErrCode, rst.StreamID)
					}
					p, ok := f.(*http2.PingFrame)
					return ok && p.IsAck()
				})
			} else if got := c.firstReset(1); got != tc.want {
				t.Fatalf("first RST_STREAM of stream 1: %s, want %s", got, tc.want)
			}
			awaitNoStreams(t, srv)
			c.request(3, true)
			c.awaitResponseEnd(3)
		})
	}
}
