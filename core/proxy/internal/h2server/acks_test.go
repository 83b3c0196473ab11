package h2server

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// serveCounting is serve with the server's sockets counting their writes.
func serveCounting(t *testing.T, cfg Config, writes *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.ServeConn(countingConn{Conn: nc, writes: writes}, nil) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		_ = s.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// sendTogether writes frames the client wrote into one buffer with one write(2), as grpc-go
// sends its BDP PING and its next request.
func (c *rawClient) sendTogether(write func(fr *http2.Framer) error) {
	c.t.Helper()
	var buf bytes.Buffer
	if err := write(http2.NewFramer(&buf, nil)); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(buf.Bytes()); err != nil {
		c.t.Fatal(err)
	}
}

// TestPingAckRidesWithResponse: a PING that comes with a request is acknowledged in the
// response's write, not in a write of its own (two writes per call before), and the
// acknowledgement still comes first.
func TestPingAckRidesWithResponse(t *testing.T) {
	var writes atomic.Int64
	addr := serveCounting(t, Config{testAckDelay: time.Minute, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})}, &writes)
	c := dialRaw(t, addr)
	c.until("the server's SETTINGS", func(f http2.Frame) bool {
		s, ok := f.(*http2.SettingsFrame)
		return ok && !s.IsAck()
	})
	if err := c.fr.WriteSettingsAck(); err != nil {
		t.Fatal(err)
	}
	c.until("the SETTINGS ack", func(f http2.Frame) bool {
		s, ok := f.(*http2.SettingsFrame)
		return ok && s.IsAck()
	})
	for i := range uint32(20) {
		id := 2*i + 1
		before := writes.Load()
		block := c.block()
		c.sendTogether(func(fr *http2.Framer) error {
			if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
				return err
			}
			return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
		})
		acked := false
		c.until("the response", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.PingFrame:
				acked = f.IsAck() && f.Data == [8]byte{byte(i)}
			case *http2.HeadersFrame:
				if !acked {
					t.Fatalf("call %d: response header before the PING's acknowledgement", i)
				}
			case *http2.DataFrame:
				return f.StreamID == id && f.StreamEnded()
			}
			return false
		})
		if n := writes.Load() - before; n != 1 {
			t.Fatalf("call %d: %d writes for the acknowledgement and the response, want 1", i, n)
		}
	}
}

// TestHeldPingAckBounded: an acknowledgement held for a response that does not come (a handler
// that runs on) still goes out (the timer: without it the acknowledgement would wait for the
// handler, released only once it came), and a PING on an idle connection is answered.
func TestHeldPingAckBounded(t *testing.T) {
	release := make(chan struct{})
	_, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		<-release
		_, _ = w.Write([]byte("late"))
	})})
	c := dialRaw(t, addr)
	block := c.block()
	start := time.Now()
	c.sendTogether(func(fr *http2.Framer) error {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			return err
		}
		return fr.WritePing(false, [8]byte{'h', 'e', 'l', 'd'})
	})
	c.until("the PING's acknowledgement while the handler runs", func(f http2.Frame) bool {
		if _, ok := f.(*http2.HeadersFrame); ok {
			t.Fatal("the response came before the acknowledgement")
		}
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == [8]byte{'h', 'e', 'l', 'd'}
	})
	t.Logf("held acknowledgement after %v", time.Since(start))
	close(release)
	c.until("the response", func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		return ok && d.StreamEnded()
	})
	if err := c.fr.WritePing(false, [8]byte{'i', 'd', 'l', 'e'}); err != nil {
		t.Fatal(err)
	}
	c.until("the idle connection's acknowledgement", func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == [8]byte{'i', 'd', 'l', 'e'}
	})
}
