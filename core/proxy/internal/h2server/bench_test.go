package h2server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// countingConn counts the server's socket writes.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// BenchmarkServe is the server's own cost per request on loopback: a frame-level client sends
// batches of `inflight` GET requests in one write and reads their responses; the handler answers
// as the benchmark backend does (three header fields, a 12-byte body). Besides time and
// allocations per request it reports the server's socket writes per request (writes/op), the
// figure response coalescing lowers.
//
//	go test -run '^$' -bench BenchmarkServe -benchmem ./core/proxy/internal/h2server/
func BenchmarkServe(b *testing.B) {
	for _, inflight := range []int{1, 10} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) { benchServe(b, inflight) })
	}
}

func benchServe(b *testing.B, inflight int) {
	body := []byte("hello world\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hdr := w.Header()
		hdr["Content-Type"] = []string{"text/plain"}
		hdr["X-Backend-Port"] = []string{"18080"}
		hdr["Content-Length"] = []string{"12"}
		_, _ = w.Write(body)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := New(Config{Handler: h})
	var writes atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		s.ServeConn(countingConn{nc, &writes}, nil)
	}()
	defer func() {
		_ = ln.Close()
		_ = s.Close()
		wg.Wait()
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	bw := bufio.NewWriterSize(nc, 64<<10)
	fr := http2.NewFramer(bw, bufio.NewReaderSize(nc, 64<<10))
	fr.SetReuseFrames()
	// Fields the encoder never indexes (or finds in the static table): the same block can be
	// sent on every stream.
	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "127.0.0.1"}, {Name: ":path", Value: "/12"}, {Name: "user-agent", Value: "bench"}} {
		f.Sensitive = true
		_ = enc.WriteField(f)
	}
	block := hbuf.Bytes()
	const window = 1 << 30
	_, _ = io.WriteString(bw, clientPreface)
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: window})
	_ = fr.WriteWindowUpdate(0, window-65535)
	var received int64
	id := uint32(1)

	writes.Store(0)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(inflight, b.N-done)
		for range n {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true})
			id += 2
		}
		if received > window/2 {
			_ = fr.WriteWindowUpdate(0, uint32(received))
			received = 0
		}
		if err := bw.Flush(); err != nil {
			b.Fatal(err)
		}
		for ended := 0; ended < n; {
			f, err := fr.ReadFrame()
			if err != nil {
				b.Fatal(err)
			}
			switch f := f.(type) {
			case *http2.DataFrame:
				received += int64(f.Length)
				if f.StreamEnded() {
					ended++
				}
			case *http2.RSTStreamFrame:
				b.Fatalf("stream %d reset: %v", f.StreamID, f.ErrCode)
			case *http2.GoAwayFrame:
				b.Fatalf("GOAWAY %v", f.ErrCode)
			}
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
}
