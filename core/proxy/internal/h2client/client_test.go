package h2client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backend serves h over cleartext HTTP/2 (prior knowledge) with net/http's server on loopback.
func backend(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// countingConn counts the writes made to the socket.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func countingDial(writes *atomic.Int64) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: nc, writes: writes}, nil
	}
}

func post(addr, path string, body []byte) func(add func(name, value string)) {
	return func(add func(name, value string)) {
		add(":method", http.MethodPost)
		add(":scheme", "http")
		add(":authority", addr)
		add(":path", path)
		add("content-length", strconv.Itoa(len(body)))
	}
}

// echo returns the request body with its SHA-256 in the trailer X-Sum.
func echo(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Trailer", "X-Sum")
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, h), r.Body); err != nil {
		return
	}
	w.Header().Set("X-Sum", fmt.Sprintf("%x", h.Sum(nil)))
}

// readAll drains a stream's response body and returns it with the X-Sum trailer.
func readAll(t *testing.T, s *Stream) (string, string) {
	t.Helper()
	body, sum, err := readBody(s)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status() != 200 {
		t.Fatalf("status %d", s.Status())
	}
	return body, sum
}

// readBody is readAll for a goroutine: the error is returned, the status left to the caller.
func readBody(s *Stream) (body, sum string, err error) {
	if err := s.AwaitHeader(nil); err != nil {
		return "", "", err
	}
	var got bytes.Buffer
	for {
		p, end, err := s.Next(nil)
		got.Write(p)
		s.Consumed(p)
		if err != nil {
			return got.String(), "", err
		}
		if end {
			break
		}
	}
	h := http.Header{}
	AddFields(h, s.Trailer(), func(k string) string { return k })
	return got.String(), h.Get("X-Sum"), nil
}

// A call whose body is whole leaves in one write(2): HEADERS, DATA and END_STREAM together, with
// no goroutine sending the body after the header; and the response comes back whole with its
// trailer.
func TestWholeBodyOneWrite(t *testing.T) {
	addr := backend(t, echo)
	var writes atomic.Int64
	ps := NewPools[string](0)
	p := ps.Pool(addr, addr, countingDial(&writes), time.Minute)
	ctx := context.Background()
	body := []byte("a unary call's message")
	want := fmt.Sprintf("%x", sha256.Sum256(body))
	for i := range 3 { // the first call dials and writes the preface; the others find it warm
		before := writes.Load()
		s, err := p.Open(ctx, post(addr, "/", body), body, true)
		if err != nil {
			t.Fatal(err)
		}
		got, sum := readAll(t, s) // the request was on the socket before the response came
		s.Finish()
		if n := writes.Load() - before; i > 0 && n != 1 {
			t.Fatalf("call %d: %d socket writes, want 1", i, n)
		}
		if got != string(body) || sum != want {
			t.Fatalf("call %d: got %q, trailer X-Sum %q", i, got, sum)
		}
	}
}

// A whole body larger than the peer's windows goes partly with the header and the rest as the
// windows open; many streams at once share the connection and each gets its own bytes back.
func TestBodiesPastWindowAndConcurrentStreams(t *testing.T) {
	addr := backend(t, echo)
	var writes atomic.Int64
	ps := NewPools[string](0)
	p := ps.Pool(addr, addr, countingDial(&writes), time.Minute)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			body := bytes.Repeat([]byte{byte('a' + i%26)}, 1000+i*20000) // up to 620 KB: past 64 KiB windows
			s, err := p.Open(ctx, post(addr, "/", body), body, true)
			if err != nil {
				errs <- err
				return
			}
			defer s.Finish()
			got, sum, err := readBody(s)
			if err != nil {
				errs <- fmt.Errorf("stream %d: %w", i, err)
				return
			}
			if got != string(body) || sum != fmt.Sprintf("%x", sha256.Sum256(body)) {
				errs <- fmt.Errorf("stream %d: %d bytes back of %d, trailer %q", i, len(got), len(body), sum)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	p.mu.Lock()
	n := len(p.conns)
	p.mu.Unlock()
	if n != 1 {
		t.Errorf("%d connections for 32 streams, want 1", n)
	}
}

// A body still arriving streams through SendBody, ending with the caller's trailers.
func TestSendBodyWithTrailers(t *testing.T) {
	addr := backend(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Len", strconv.Itoa(len(b)))
		w.Header().Set("X-Trailer", r.Trailer.Get("X-Client"))
	})
	ps := NewPools[string](0)
	p := ps.Pool(addr, addr, countingDial(new(atomic.Int64)), time.Minute)
	pr, pw := io.Pipe()
	s, err := p.Open(context.Background(), func(add func(string, string)) {
		post(addr, "/", nil)(func(k, v string) {
			if k != "content-length" {
				add(k, v)
			}
		})
		add("trailer", "X-Client")
	}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Finish()
	go s.SendBody(pr, func() http.Header { return http.Header{"X-Client": {"done"}} })
	for range 10 {
		_, _ = pw.Write(bytes.Repeat([]byte("x"), 1000))
	}
	_ = pw.Close()
	if err := s.AwaitHeader(nil); err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	AddFields(h, s.Header(), func(k string) string { return k })
	if h.Get("X-Len") != "10000" || h.Get("X-Trailer") != "done" {
		t.Fatalf("backend saw %v", h)
	}
}

// A pool whose last connection closed is forgotten, so endpoints that come and go do not pile up.
func TestPoolForgottenWhenEmpty(t *testing.T) {
	addr := backend(t, func(http.ResponseWriter, *http.Request) {})
	dial := countingDial(new(atomic.Int64))
	ps := NewPools[string](0)
	p := ps.Pool(addr, addr, dial, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ps.Len(); got != 1 {
		t.Fatalf("%d pools with a connection open, want 1", got)
	}
	c.release()
	ps.CloseIdle()
	if got := ps.Len(); got != 0 {
		t.Fatalf("%d pools after the last connection closed, want 0", got)
	}
	// A forwarder still holding the forgotten pool can use it; a new lookup starts afresh.
	if c, err = p.get(ctx); err != nil {
		t.Fatal(err)
	}
	c.release()
	if ps.Pool(addr, addr, dial, time.Minute) == p {
		t.Fatal("the forgotten pool was handed out again")
	}
	ps.CloseIdle()
	p.CloseIdle()
}

// An idle connection is closed between one and two idle timeouts after its last stream, and the
// pool then dials afresh.
func TestIdleConnectionClosed(t *testing.T) {
	addr := backend(t, echo)
	ps := NewPools[string](0)
	p := ps.Pool(addr, addr, countingDial(new(atomic.Int64)), 50*time.Millisecond)
	body := []byte("x")
	s, err := p.Open(context.Background(), post(addr, "/", body), body, true)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, s)
	s.Finish()
	p.mu.Lock()
	c := p.conns[0]
	p.mu.Unlock()
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
	if ps.Len() != 0 {
		t.Fatal("the pool of a closed connection was kept")
	}
}

// TestIdleCountsFromTheLastStreamEnd: a stream open across the idle timer's look, ended just
// after it, still leaves its connection at least an idle timeout before it is closed (the idle
// time runs from the last stream's end, not from its start).
func TestIdleCountsFromTheLastStreamEnd(t *testing.T) {
	addr := backend(t, echo)
	ps := NewPools[string](0)
	const idle = 100 * time.Millisecond
	p := ps.Pool(addr, addr, countingDial(new(atomic.Int64)), idle)
	body := []byte("x")
	s, err := p.Open(context.Background(), post(addr, "/", body), body, true)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, s)
	p.mu.Lock()
	c := p.conns[0]
	p.mu.Unlock()
	// Keep the stream open across two of the idle timer's looks (the scenario itself, not a
	// wait for a condition): the first clears the flag its taking set, so only its end can set
	// it again. Without that, the connection closed at the first look after the end: less than
	// an idle timeout later, every time.
	time.Sleep(idle * 5 / 2)
	s.Finish()
	ended := time.Now()
	select {
	case <-c.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
	if d := time.Since(ended); d < idle {
		t.Fatalf("closed %v after its last stream ended, before the %v idle timeout", d, idle)
	}
}
