package h2server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// rawClient speaks HTTP/2 frame by frame, as an attacker would.
type rawClient struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	henc *hpack.Encoder
}

func dialRaw(t *testing.T, addr string, settings ...http2.Setting) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	c := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	c.henc = hpack.NewEncoder(&c.hbuf)
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(nc, clientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return c
}

// block encodes a GET request's header block, with extra fields.
func (c *rawClient) block(extra ...hpack.HeaderField) []byte {
	c.hbuf.Reset()
	for _, f := range append([]hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "example.com"}, {Name: ":path", Value: "/"}}, extra...) {
		_ = c.henc.WriteField(f)
	}
	return bytes.Clone(c.hbuf.Bytes())
}

func (c *rawClient) request(id uint32, end bool, extra ...hpack.HeaderField) {
	c.t.Helper()
	if err := c.send(id, end, extra...); err != nil {
		c.t.Fatal(err)
	}
}

// send is request for a goroutine other than the test's.
func (c *rawClient) send(id uint32, end bool, extra ...hpack.HeaderField) error {
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block(extra...), EndStream: end, EndHeaders: true})
}

// until reads frames until match returns true, failing if the connection ends first. Frames are
// only valid inside match.
func (c *rawClient) until(what string, match func(http2.Frame) bool) {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(f) {
			return
		}
	}
}

// goAway waits for a GOAWAY with code, then for the connection to close.
func (c *rawClient) goAway(code http2.ErrCode) {
	c.t.Helper()
	c.until("GOAWAY "+code.String(), func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok && g.ErrCode != code {
			c.t.Fatalf("GOAWAY %s, want %s", g.ErrCode, code)
		}
		return ok
	})
	for {
		if _, err := c.fr.ReadFrame(); err != nil {
			if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
				c.t.Fatalf("after GOAWAY: %v, want the connection closed", err)
			}
			return
		}
	}
}

// TestRapidResetBounded: streams reset by the client keep their concurrency slot until their
// handler returns, so opening and resetting streams never runs more handlers than
// MAX_CONCURRENT_STREAMS, and a client that keeps doing it is sent away (CVE-2023-44487).
func TestRapidResetBounded(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ignoresCtx bool
	}{{"handlers that ignore cancellation", true}, {"handlers that stop when cancelled", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var running, peak atomic.Int32
			release := make(chan struct{})
			var once sync.Once
			defer once.Do(func() { close(release) })
			_, addr := serve(t, Config{MaxConcurrentStreams: 10, Handler: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				n := running.Add(1)
				defer running.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if tc.ignoresCtx {
					<-release
				} else {
					<-r.Context().Done()
				}
			})})
			c := dialRaw(t, addr)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for id := uint32(1); id < 2000; id += 2 {
					if c.send(id, true) != nil || c.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
						return
					}
				}
			}()
			c.goAway(http2.ErrCodeEnhanceYourCalm)
			_ = c.nc.Close()
			<-done
			if p := peak.Load(); p > 10 {
				t.Fatalf("%d handlers ran at once, MAX_CONCURRENT_STREAMS is 10", p)
			}
		})
	}
}

// TestContinuationFloodBounded: a header block that never ends (empty CONTINUATION frames) is
// cut off after a bounded number of frames (CVE-2024-27316).
func TestContinuationFloodBounded(t *testing.T) {
	_, addr := serve(t, Config{Handler: echo(), MaxHeaderListSize: 16 << 10})
	c := dialRaw(t, addr)
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: c.block(), EndStream: true}); err != nil {
		t.Fatal(err)
	}
	sent := make(chan int, 1)
	go func() {
		n := 0
		for ; n < 100000; n++ {
			if c.fr.WriteContinuation(1, false, nil) != nil {
				break
			}
		}
		sent <- n
	}()
	c.goAway(http2.ErrCodeEnhanceYourCalm)
	_ = c.nc.Close()
	if n := <-sent; n >= 100000 {
		t.Fatalf("the server took all %d CONTINUATION frames", n)
	}
}

// TestHPACKBombAnswered431: a small block that decodes to a header list far over the limit
// (one large field indexed once, then referenced again and again) is answered 431 without
// running the handler, and the connection stays usable: its HPACK state was kept in step.
func TestHPACKBombAnswered431(t *testing.T) {
	var handled atomic.Int32
	_, addr := serve(t, Config{MaxHeaderListSize: 16 << 10, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		_, _ = io.WriteString(w, "ok")
	})})
	c := dialRaw(t, addr)
	big := hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 3000)}
	fields := make([]hpack.HeaderField, 300) // ~900 KB decoded
	for i := range fields {
		fields[i] = big
	}
	blk := c.block(fields...)
	if len(blk) > 8<<10 {
		t.Fatalf("the bomb is %d bytes encoded; it should be small", len(blk))
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	dec := hpack.NewDecoder(4096, nil)
	status := func(id uint32) string {
		var st string
		c.until("response to stream", func(f http2.Frame) bool {
			h, ok := f.(*http2.HeadersFrame)
			if !ok || h.StreamID != id {
				return false
			}
			fs, err := dec.DecodeFull(h.HeaderBlockFragment())
			if err != nil {
				t.Fatal(err)
			}
			st = fs[0].Value
			return true
		})
		return st
	}
	if st := status(1); st != "431" {
		t.Fatalf("status %s, want 431", st)
	}
	c.request(3, true, hpack.HeaderField{Name: "x-small", Value: "1"})
	if st := status(3); st != "200" {
		t.Fatalf("next request: status %s, want 200", st)
	}
	if n := handled.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want once (not for the bomb)", n)
	}
}

// TestControlFrameFloods: PING and SETTINGS frames beyond the rate limit close the connection
// with ENHANCE_YOUR_CALM, whether or not the client reads the answers.
func TestControlFrameFloods(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(*http2.Framer) error
	}{
		{"PING", func(fr *http2.Framer) error { return fr.WritePing(false, [8]byte{1}) }},
		{"SETTINGS", func(fr *http2.Framer) error {
			return fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0})
		}},
		{"PRIORITY", func(fr *http2.Framer) error { return fr.WritePriority(3, http2.PriorityParam{StreamDep: 1, Weight: 1}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := serve(t, Config{Handler: echo()})
			c := dialRaw(t, addr)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range 5 * floodLimit {
					if tc.send(c.fr) != nil {
						return
					}
				}
			}()
			c.goAway(http2.ErrCodeEnhanceYourCalm)
			_ = c.nc.Close()
			<-done
		})
	}
}

// TestZeroWindowStall: a client that grants no flow-control credit cannot hold a stream (and
// its handler) forever: after StallTimeout the stream is reset with CANCEL, the handler's write
// fails, and the connection still serves.
func TestZeroWindowStall(t *testing.T) {
	writeErr := make(chan error, 1)
	_, addr := serve(t, Config{StallTimeout: 200 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Small") != "" {
			return
		}
		_, err := w.Write(make([]byte, 64<<10))
		writeErr <- err
	})})
	c := dialRaw(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	c.request(1, true)
	c.until("RST_STREAM CANCEL", func(f http2.Frame) bool {
		rst, ok := f.(*http2.RSTStreamFrame)
		if d, isData := f.(*http2.DataFrame); isData && len(d.Data()) > 0 {
			t.Fatalf("DATA sent without window: %d bytes", len(d.Data()))
		}
		return ok && rst.StreamID == 1 && rst.ErrCode == http2.ErrCodeCancel
	})
	if err := <-writeErr; err == nil {
		t.Fatal("the handler's write succeeded on a stalled stream")
	}
	c.request(3, true, hpack.HeaderField{Name: "x-small", Value: "1"})
	c.until("the next stream's response", func(f http2.Frame) bool {
		h, ok := f.(*http2.HeadersFrame)
		return ok && h.StreamID == 3
	})
}

// TestIdleTimeoutGoAway: a connection without streams for IdleTimeout gets GOAWAY(NO_ERROR) and
// is closed.
func TestIdleTimeoutGoAway(t *testing.T) {
	_, addr := serve(t, Config{IdleTimeout: 200 * time.Millisecond, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})})
	c := dialRaw(t, addr)
	c.request(1, true)
	c.until("the response", func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamID == 1 && d.StreamEnded()
	})
	c.goAway(http2.ErrCodeNo)
}

// TestPingsWithTrafficAllowed: PINGs in proportion to a connection's traffic are not a flood.
// grpc-go sends a BDP PING per call at one call in flight (a request, then a PING when the answer
// arrives) and one per message received on a stream; counted, they closed busy gRPC connections
// with ENHANCE_YOUR_CALM and failed the calls in flight (issue 19). Each case sends three times
// the flood limit of PINGs, far faster than the limit's second, and must get every answer and
// every acknowledgement with no GOAWAY or reset. A client that pings far more than it works is
// still sent away.
func TestPingsWithTrafficAllowed(t *testing.T) {
	const n = 3 * floodLimit
	t.Run("a PING with every request", func(t *testing.T) {
		_, addr := serve(t, Config{MaxConcurrentStreams: n + 1, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "ok")
		})})
		c := dialRaw(t, addr)
		sendErr := make(chan error, 1)
		go func() {
			for i := range uint32(n) {
				if err := c.send(2*i+1, true); err != nil {
					sendErr <- err
					return
				}
				if err := c.fr.WritePing(false, [8]byte{byte(i)}); err != nil {
					sendErr <- err
					return
				}
			}
			sendErr <- nil
		}()
		responses, acks := 0, 0
		c.until("every response and PING ack", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.DataFrame:
				if f.StreamEnded() {
					responses++
				}
			case *http2.PingFrame:
				if f.IsAck() {
					acks++
				}
			case *http2.GoAwayFrame:
				t.Fatalf("GOAWAY %s after %d responses and %d acks", f.ErrCode, responses, acks)
			case *http2.RSTStreamFrame:
				t.Fatalf("RST_STREAM %s on stream %d", f.ErrCode, f.StreamID)
			}
			return responses == n && acks == n
		})
		if err := <-sendErr; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a PING with every message received", func(t *testing.T) {
		_, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			for range n {
				_, _ = io.WriteString(w, "message")
				w.(http.Flusher).Flush()
			}
		})})
		c := dialRaw(t, addr)
		c.request(1, true)
		messages, acks := 0, 0
		c.until("every message and PING ack", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.DataFrame:
				if len(f.Data()) > 0 {
					messages++
					if err := c.fr.WritePing(false, [8]byte{byte(messages)}); err != nil {
						t.Fatal(err)
					}
				}
			case *http2.PingFrame:
				if f.IsAck() {
					acks++
				}
			case *http2.GoAwayFrame:
				t.Fatalf("GOAWAY %s after %d messages and %d acks", f.ErrCode, messages, acks)
			}
			return messages == n && acks == n
		})
	})
	t.Run("far more PINGs than requests", func(t *testing.T) {
		_, addr := serve(t, Config{Handler: echo()})
		c := dialRaw(t, addr)
		c.request(1, true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 5 * floodLimit {
				if c.fr.WritePing(false, [8]byte{1}) != nil {
					return
				}
			}
		}()
		c.goAway(http2.ErrCodeEnhanceYourCalm)
		_ = c.nc.Close()
		<-done
	})
}
