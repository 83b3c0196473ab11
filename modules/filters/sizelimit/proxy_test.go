package sizelimit_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
	"github.com/coxswain-labs/coxswain/modules/filters/sizelimit"
)

const limit = 1 << 20

func spec(size string) []*irv1.ModuleConfig {
	return []*irv1.ModuleConfig{core.MustConfig(sizelimit.ModuleID, sizelimit.Config{MaxSize: size})}
}

// backend counts the body bytes each request delivered to it, whether the body ended well or
// not (filtertest's recording backend only keeps bodies that arrived whole).
type backend struct {
	got chan received
	// early answers 200 and flushes before reading the body.
	early bool
}

type received struct {
	n   int64
	err error
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.early {
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex() // else net/http reads the body before it sends the header
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush()
	}
	n, err := io.Copy(io.Discard, r.Body)
	b.got <- received{n, err}
	if err == nil && !b.early {
		fmt.Fprintf(w, "got %d", n)
	}
}

// start serves a route with a RequestSizeLimit of size in front of a counting backend.
func start(t *testing.T, size string, early bool) (*filtertest.Harness, *backend) {
	t.Helper()
	h := filtertest.Start(t, spec(size), filtertest.Options{Modules: []core.Module{(*sizelimit.RequestSizeLimit)(nil)}, Log: zaptest.NewLogger(t)})
	b := &backend{got: make(chan received, 16), early: early}
	srv := httptest.NewUnstartedServer(b)
	srv.EnableHTTP2 = false
	srv.Start()
	t.Cleanup(srv.Close)
	var port uint32
	_, _ = fmt.Sscanf(srv.Listener.Addr().String()[strings.LastIndexByte(srv.Listener.Addr().String(), ':')+1:], "%d", &port)
	snap, err := filtertest.Snapshot(spec(size), filtertest.Options{}, port)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Proxy.Apply(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	return h, b
}

// source is a request body of size zero bytes that counts how much of it was read, and says when
// the client closed it (the transport does once it stops sending).
type source struct {
	left   int64
	read   atomic.Int64
	closed chan struct{}
	once   atomic.Bool
}

func newSource(size int64) *source { return &source{left: size, closed: make(chan struct{})} }

func (s *source) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	clear(p)
	s.left -= int64(len(p))
	s.read.Add(int64(len(p)))
	return len(p), nil
}

func (s *source) Close() error {
	if s.once.CompareAndSwap(false, true) {
		close(s.closed)
	}
	return nil
}

func client(h2c bool) *http.Client {
	tr := &http.Transport{}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// upload sends a body of size bytes (declared as such when declared is set, else of unknown
// length: chunked on HTTP/1.1) and returns the status (0 when the connection ended instead), the
// protocol, and how much of the body the client read from its source once it stopped sending.
func upload(t *testing.T, h *filtertest.Harness, h2c bool, size int64, declared bool) (status, proto int, sent int64) {
	t.Helper()
	c := client(h2c)
	defer c.CloseIdleConnections()
	src := newSource(size)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.URL+"/upload", src)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	if declared {
		req.ContentLength = size
	}
	resp, err := c.Do(req)
	if err == nil {
		status, proto = resp.StatusCode, resp.ProtoMajor
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	} else {
		t.Logf("the connection ended: %v", err)
	}
	select {
	case <-src.closed:
	case <-time.After(30 * time.Second):
		t.Fatalf("the client is still sending after 30s: %d bytes read from the source", src.read.Load())
	}
	return status, proto, src.read.Load()
}

// TestHugeUploadStopsEarly is the point of the filter: a 10 GiB upload against a 1 MiB limit,
// over HTTP/1.1 and HTTP/2, of declared or unknown length, is refused (413, or at worst the
// connection ends) after the proxy read little more than the limit; the backend never gets more
// than the limit, and never the end of the body.
func TestHugeUploadStopsEarly(t *testing.T) {
	const huge = 10 << 30
	for _, tc := range []struct {
		name          string
		h2c, declared bool
	}{
		{"HTTP/1.1 chunked", false, false},
		{"HTTP/1.1 Content-Length", false, true},
		{"HTTP/2 streamed", true, false},
		{"HTTP/2 content-length", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, b := start(t, "1m", false)
			status, proto, sent := upload(t, h, tc.h2c, huge, tc.declared)
			if status != 0 && status != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 413 (or the connection ended)", status)
			}
			if tc.h2c && status != http.StatusRequestEntityTooLarge {
				t.Errorf("HTTP/2: status %d, want 413: the response had not started", status)
			}
			if status != 0 && (proto == 2) != tc.h2c {
				t.Errorf("answered over HTTP/%d", proto)
			}
			// Socket buffers and HTTP/2 flow-control windows hold a few MiB; 10 GiB is not read.
			if sent > 64<<20 {
				t.Errorf("the client sent %d bytes before the proxy stopped it", sent)
			}
			t.Logf("status %d; the client sent %d bytes (%.1f MiB) of 10 GiB", status, sent, float64(sent)/(1<<20))
			if tc.declared {
				if len(b.got) != 0 {
					t.Errorf("a declared length over the limit reached the backend: %+v", <-b.got)
				}
				return
			}
			select {
			case rx := <-b.got:
				if rx.n > limit || rx.err == nil {
					t.Errorf("the backend received %d bytes (error %v), want at most %d and a body that never ends", rx.n, rx.err, limit)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the backend saw no request")
			}
		})
	}
}

// TestWithinLimit: bodies up to the limit, of declared or unknown length, small (the engine's
// buffered fast path) or large (streamed), reach the backend whole.
func TestWithinLimit(t *testing.T) {
	h, b := start(t, "1m", false)
	for _, h2c := range []bool{false, true} {
		for _, size := range []int64{0, 1, 4 << 10, 100 << 10, limit} {
			for _, declared := range []bool{true, false} {
				status, _, _ := upload(t, h, h2c, size, declared)
				if status != http.StatusOK {
					t.Errorf("h2c=%v %d bytes declared=%v: status %d", h2c, size, declared, status)
					continue
				}
				if rx := <-b.got; rx.n != size || rx.err != nil {
					t.Errorf("h2c=%v %d bytes declared=%v: the backend got %d, %v", h2c, size, declared, rx.n, rx.err)
				}
			}
		}
	}
}

// TestJustOver: one byte over the limit is refused, whether declared or streamed, and the
// backend gets no more than the limit.
func TestJustOver(t *testing.T) {
	h, b := start(t, "64k", false)
	for _, h2c := range []bool{false, true} {
		for _, declared := range []bool{true, false} {
			status, _, _ := upload(t, h, h2c, 64<<10+1, declared)
			if status != http.StatusRequestEntityTooLarge {
				t.Errorf("h2c=%v declared=%v: status %d, want 413", h2c, declared, status)
			}
			if declared {
				continue
			}
			if rx := <-b.got; rx.n > 64<<10 || rx.err == nil {
				t.Errorf("h2c=%v: the backend got %d bytes, %v", h2c, rx.n, rx.err)
			}
		}
	}
}

// TestResponseStarted: an upstream that answers before reading the body cannot be turned into a
// 413; the engine drops the exchange when the body goes over the limit, so the client's response
// is cut short (HTTP/1.1: the connection closes; HTTP/2: the stream is reset) and the backend
// still gets no more than the limit. The client sends 1 KiB, waits for the response header, then
// sends the rest.
func TestResponseStarted(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		h, b := start(t, "1m", true)
		c := client(h2c)
		src := &gated{source: newSource(10 << 30), first: 1 << 10, open: make(chan struct{})}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.URL+"/upload", src)
		req.ContentLength = -1
		resp, err := c.Do(req)
		close(src.open)
		if err != nil {
			t.Fatalf("h2c=%v: %v", h2c, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("h2c=%v: status %d, want the backend's 200", h2c, resp.StatusCode)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err == nil {
			t.Errorf("h2c=%v: the response ended normally", h2c)
		}
		t.Logf("h2c=%v: the response ended with %v", h2c, err)
		if rx := <-b.got; rx.n > limit || rx.err == nil {
			t.Errorf("h2c=%v: the backend got %d bytes, %v", h2c, rx.n, rx.err)
		}
		select {
		case <-src.closed:
		case <-time.After(30 * time.Second):
			t.Fatalf("h2c=%v: the client is still sending", h2c)
		}
		if sent := src.read.Load(); sent > 64<<20 {
			t.Errorf("h2c=%v: the client sent %d bytes", h2c, sent)
		}
		c.CloseIdleConnections()
	}
}

// gated is a source that returns its first bytes, then waits until open is closed.
type gated struct {
	*source
	first int64
	open  chan struct{}
}

func (g *gated) Read(p []byte) (int, error) {
	if n := g.first - g.read.Load(); n > 0 {
		return g.source.Read(p[:min(int64(len(p)), n)])
	}
	<-g.open
	return g.source.Read(p)
}

// TestErrorStatus: only a StatusError in the chain has a status.
func TestErrorStatus(t *testing.T) {
	if _, ok := core.ErrorStatus(errors.New("x")); ok {
		t.Error("a plain error has a status")
	}
	if st, ok := core.ErrorStatus(fmt.Errorf("h2c: reading the request body: %w", core.ErrBodyTooLarge)); !ok || st != 413 {
		t.Errorf("wrapped ErrBodyTooLarge: %d %v", st, ok)
	}
}
