package h2client

import (
	"bytes"
	"context"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// pingingBackend is an HTTP/2 peer that answers every request with a PING, HEADERS, and DATA
// with END_STREAM in one write, as grpc-go's server sends its BDP PING with a response (the
// PING first, so that the client has read it before the call ends and its next request is
// written).
// It reports on acks the data of every PING acknowledgement it receives, and on acked, before
// each request, whether the previous response's PING had been acknowledged by then.
func pingingBackend(t *testing.T, acks chan<- [8]byte, acked chan<- bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, err := io.ReadFull(nc, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		var out bytes.Buffer
		fr := http2.NewFramer(&out, nc)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		var hbuf bytes.Buffer
		henc := hpack.NewEncoder(&hbuf)
		flush := func() bool { _, err := nc.Write(out.Bytes()); out.Reset(); return err == nil }
		if fr.WriteSettings() != nil || !flush() {
			return
		}
		var ping byte
		outstanding := false
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() && (fr.WriteSettingsAck() != nil || !flush()) {
					return
				}
			case *http2.PingFrame:
				if f.IsAck() {
					outstanding = false
					acks <- f.Data
				}
			case *http2.MetaHeadersFrame:
				acked <- !outstanding
			case *http2.DataFrame:
				if !f.StreamEnded() {
					continue
				}
				hbuf.Reset()
				_ = henc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
				ping++
				if fr.WritePing(false, [8]byte{ping}) != nil ||
					fr.WriteHeaders(http2.HeadersFrameParam{StreamID: f.StreamID, BlockFragment: hbuf.Bytes(), EndHeaders: true}) != nil ||
					fr.WriteData(f.StreamID, true, []byte("answer")) != nil || !flush() {
					return
				}
				outstanding = true
			}
		}
	}()
	return ln.Addr().String()
}

// TestPingAckRidesWithNextRequest: the acknowledgement of a PING that came with a response
// leaves in the next request's write (one write per call; two before: the flusher sent the
// acknowledgement as soon as the call was over), ahead of the request, and the last one, with no
// request to ride with, is sent by the timer.
func TestPingAckRidesWithNextRequest(t *testing.T) {
	acks := make(chan [8]byte, 100)
	acked := make(chan bool, 100)
	addr := pingingBackend(t, acks, acked)
	var writes atomic.Int64
	ps := NewPools[string](0)
	p := ps.Pool(addr, addr, countingDial(&writes), time.Minute)
	p.ackDelay = time.Second // the timer sends only the last one, not one a slow call's request should take
	ctx := context.Background()
	body := []byte("call")
	const calls = 20
	for i := range calls {
		before := writes.Load()
		s, err := p.Open(ctx, post(addr, "/", body), body, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.AwaitHeader(nil); err != nil {
			t.Fatal(err)
		}
		for {
			b, end, err := s.Next(nil)
			if err != nil {
				t.Fatal(err)
			}
			s.Consumed(b)
			if end {
				break
			}
		}
		s.Finish()
		settled(t, p)
		if ok := <-acked; !ok {
			t.Fatalf("call %d: the request came before the acknowledgement of the previous PING", i)
		}
		if n := writes.Load() - before; i > 0 && n != 1 {
			t.Fatalf("call %d: %d writes, want 1 (the request with the last acknowledgement)", i, n)
		}
	}
	deadline := time.After(10 * time.Second)
	for i := 1; i <= calls; i++ {
		select {
		case got := <-acks:
			if got != [8]byte{byte(i)} {
				t.Fatalf("acknowledgement %v, want PING %d's", got, i)
			}
		case <-deadline:
			t.Fatalf("PING %d not acknowledged", i)
		}
	}
}

// settled waits until p's connection has no flush owed: what the flusher was asked to send has
// been written, so the next call's writes are its own.
func settled(t *testing.T, p *Pool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.mu.Lock()
		c := p.conns[0]
		p.mu.Unlock()
		c.wmu.Lock()
		owed := c.flushOwed
		c.wmu.Unlock()
		if !owed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection's flush is still owed after 10s")
		}
		runtime.Gosched()
	}
}
