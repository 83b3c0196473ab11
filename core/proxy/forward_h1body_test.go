package proxy_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// bodyBackend reports the framing and the body of what it received, and counts connections and
// requests. With a non-nil firstChunk it signals once it has read the first 5 bytes of a body.
type bodyBackend struct {
	*testBackend
	conns, reqs atomic.Int64
	firstChunk  chan struct{}
}

func newBodyBackend(t *testing.T) *bodyBackend {
	t.Helper()
	b := &bodyBackend{firstChunk: make(chan struct{}, 1)}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.reqs.Add(1)
		head := make([]byte, 5)
		n, _ := io.ReadFull(r.Body, head)
		if n == 5 {
			select {
			case b.firstChunk <- struct{}{}:
			default:
			}
		}
		rest, err := io.ReadAll(r.Body)
		body := append(head[:n], rest...)
		w.Header().Set("X-Got-Length", r.Header.Get("Content-Length"))
		w.Header().Set("X-Got-Te", strings.Join(r.TransferEncoding, ","))
		w.Header().Set("X-Got-Size", strconv.Itoa(len(body)))
		w.Header().Set("X-Got-Err", func() string {
			if err != nil {
				return err.Error()
			}
			return ""
		}())
		_, _ = w.Write(body)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			b.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	b.testBackend = &testBackend{name: "body", port: portOf(t, srv.Listener.Addr().String())}
	return b
}

func bodyProxy(t *testing.T, be *testBackend) string {
	t.Helper()
	l := httpListener(0, server("", vhost("", route("r", "/", backend("body", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("body", be)}))
	return addrOf(t, p, l.Name)
}

func chunk(b []byte) string {
	var s strings.Builder
	for len(b) > 0 {
		n := min(len(b), 8<<10)
		s.WriteString(strconv.FormatInt(int64(n), 16) + "\r\n")
		s.Write(b[:n])
		s.WriteString("\r\n")
		b = b[n:]
	}
	return s.String() + "0\r\n\r\n"
}

// Request bodies reach the upstream whole, whichever path takes them: the fast path for those it
// reads first (a declared length up to 64 KiB, a chunked body that has arrived, sent on with a
// Content-Length), the stdlib one for the rest; and the upstream connection is reused after each.
func TestH1RequestBodies(t *testing.T) {
	body := func(n int) []byte { return bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n] }
	cases := []struct {
		name    string
		body    []byte
		chunked bool
		length  string // the Content-Length the upstream must see; "" to not check
	}{
		{name: "length 1 KiB", body: body(1 << 10), length: "1024"},
		{name: "length 64 KiB", body: body(64 << 10), length: "65536"},
		{name: "length over 64 KiB", body: body(64<<10 + 1), length: "65537"},
		{name: "length 1 MiB", body: body(1 << 20), length: "1048576"},
		{name: "chunked small", body: []byte("hello"), chunked: true, length: "5"},
		{name: "chunked 64 KiB", body: body(64 << 10), chunked: true},
		{name: "chunked 200 KiB", body: body(200 << 10), chunked: true},
	}
	be := newBodyBackend(t)
	addr := bodyProxy(t, be.testBackend)
	c := dialClient(t, addr, false)
	br := bufio.NewReader(c)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := "POST /b HTTP/1.1\r\nHost: example.com\r\n"
			if tc.chunked {
				req += "Transfer-Encoding: chunked\r\n\r\n" + chunk(tc.body)
			} else {
				req += "Content-Length: " + strconv.Itoa(len(tc.body)) + "\r\n\r\n" + string(tc.body)
			}
			go func() { _, _ = io.WriteString(c, req) }() // the proxy may answer before it reads all
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !bytes.Equal(got, tc.body) || resp.Header.Get("X-Got-Err") != "" {
				t.Fatalf("status %d, %d bytes back (want %d), upstream error %q", resp.StatusCode, len(got), len(tc.body), resp.Header.Get("X-Got-Err"))
			}
			if tc.length != "" && resp.Header.Get("X-Got-Length") != tc.length {
				t.Errorf("upstream Content-Length %q (Transfer-Encoding %q), want %s", resp.Header.Get("X-Got-Length"), resp.Header.Get("X-Got-Te"), tc.length)
			}
		})
	}
	if n := be.conns.Load(); n > 2 {
		t.Errorf("%d upstream connections for %d requests on one client connection", n, len(cases))
	}
}

// A chunked body whose client pauses is streamed: the upstream gets the first chunk before the
// client sends the rest.
func TestH1ChunkedBodyStreams(t *testing.T) {
	be := newBodyBackend(t)
	c := dialClient(t, bodyProxy(t, be.testBackend), false)
	_, _ = io.WriteString(c, "POST /b HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	select {
	case <-be.firstChunk:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream did not get the first chunk before the rest was sent")
	}
	_, _ = io.WriteString(c, "6\r\n world\r\n0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(got) != "hello world" {
		t.Fatalf("status %d body %q", resp.StatusCode, got)
	}
}

// A body shorter than its Content-Length is refused (400) and never reaches the upstream.
func TestH1TruncatedBody(t *testing.T) {
	be := newBodyBackend(t)
	c := dialClient(t, bodyProxy(t, be.testBackend), false)
	_, _ = io.WriteString(c, "POST /b HTTP/1.1\r\nHost: example.com\r\nContent-Length: 10\r\n\r\nhello")
	_ = c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || be.reqs.Load() != 0 {
		t.Fatalf("status %d, %d upstream requests", resp.StatusCode, be.reqs.Load())
	}
}

// A request that is not idempotent is never sent twice: on a pooled connection the upstream closed
// while idle it is not risked (a peek sees the close first), and when the upstream drops it
// unanswered the client gets 502. An idempotent one is sent again on a new connection.
func TestH1RetryOnlyIdempotent(t *testing.T) {
	t.Run("closed while idle", func(t *testing.T) {
		be, closed := closingBackend(t)
		c := newClient(rawProxy(t, be), nil)
		for i := range 5 {
			req, _ := http.NewRequest(http.MethodPost, hostURL("http", "example.com", "/"), strings.NewReader("body"))
			r := must(t, c.do(req))
			if r.status != 200 || r.body != "ok" {
				t.Fatalf("request %d: status %d body %q", i, r.status, r.body)
			}
			select { // the upstream closed: on loopback its FIN is queued at the proxy by now
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the upstream did not close")
			}
		}
	})
	for _, tc := range []struct {
		method string
		status int
		reqs   int64
	}{
		{http.MethodPost, http.StatusBadGateway, 2},
		{http.MethodGet, http.StatusOK, 3},
	} {
		t.Run(tc.method+" dropped unanswered", func(t *testing.T) {
			var reqs atomic.Int64
			be, _ := rawBackend(t, func(n int64, _ *http.Request) (string, bool) {
				reqs.Store(n)
				if n == 2 {
					return "", true // read, then closed without an answer
				}
				return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
			})
			c := newClient(rawProxy(t, be), nil)
			must(t, c.get(hostURL("http", "example.com", "/warm")))
			req, _ := http.NewRequest(tc.method, hostURL("http", "example.com", "/"), nil)
			if tc.method == http.MethodPost {
				req.Body = io.NopCloser(strings.NewReader("body"))
				req.ContentLength = 4
			}
			r := must(t, c.do(req))
			if r.status != tc.status || reqs.Load() != tc.reqs {
				t.Fatalf("status %d after %d upstream requests, want %d after %d", r.status, reqs.Load(), tc.status, tc.reqs)
			}
		})
	}
}

// closingBackend answers each request with "ok", then closes the connection without saying so,
// and reports each close.
func closingBackend(t *testing.T) (*testBackend, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	closed := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err == nil {
					_, _ = io.Copy(io.Discard, r.Body)
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
				_ = c.Close()
				closed <- struct{}{}
			}()
		}
	}()
	return &testBackend{name: "raw", port: portOf(t, ln.Addr().String())}, closed
}

// An upstream that answers before reading a large body (which goes the stdlib way) gets its answer
// to the client, and the connection is not left in a state where two readers share it.
func TestH1EarlyAnswerToLargeBody(t *testing.T) {
	be := newBackend(t, "early", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	})
	l := httpListener(0, server("", vhost("", route("r", "/", backend("early", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("early", be)}))
	for range 3 {
		c := dialClient(t, addrOf(t, p, l.Name), false)
		go func() {
			_, _ = io.WriteString(c, "POST /b HTTP/1.1\r\nHost: example.com\r\nContent-Length: 1048576\r\n\r\n")
			for range 64 {
				if _, err := c.Write(make([]byte, 16<<10)); err != nil {
					return
				}
			}
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d", resp.StatusCode)
		}
		_ = c.Close()
	}
}

// HTTP/2 requests to an HTTP/1.1 cluster: a body of declared length is read whole and sent with a
// Content-Length; one of unknown length takes the stdlib path. Both arrive whole.
func TestH2RequestBodiesToH1(t *testing.T) {
	be := newBodyBackend(t)
	l := httpsListener(0, tlsServer("", []string{"ns/c"}, vhost("", route("r", "/", backend("body", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("body", be.testBackend)}, secret(t, "ns/c", "c", "example.com")))
	c := newClient(addrOf(t, p, l.Name), func(tr *http.Transport) { tr.ForceAttemptHTTP2 = true })
	body := strings.Repeat("0123456789abcdef", 64)
	for _, known := range []bool{true, false} {
		var rd io.Reader = strings.NewReader(body)
		if !known {
			rd = io.MultiReader(rd) // hides the length
		}
		req, _ := http.NewRequest(http.MethodPost, hostURL("https", "example.com", "/"), rd)
		r := must(t, c.do(req))
		if r.proto != 2 || r.status != 200 || r.body != body {
			t.Fatalf("known length %v: proto %d status %d, %d bytes back", known, r.proto, r.status, len(r.body))
		}
		if known && r.header.Get("X-Got-Length") != "1024" {
			t.Errorf("upstream Content-Length %q", r.header.Get("X-Got-Length"))
		}
	}
}

// An upstream that fails mid-response on the stdlib path (here: a request body too long for the
// fast path) aborts the client's response, which the client sees as truncated, never as complete.
func TestH1UpstreamFailsMidResponse(t *testing.T) {
	be := newBackend(t, "dies", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "part of it") // chunked: only the missing last chunk tells
		w.(http.Flusher).Flush()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = c.Close()
		}
	})
	l := httpListener(0, server("", vhost("", route("r", "/", backend("dies", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("dies", be)}))
	for _, size := range []int{10, 100 << 10} { // the fast path, then the stdlib one
		c := dialClient(t, addrOf(t, p, l.Name), false)
		_, _ = io.WriteString(c, "POST /b HTTP/1.1\r\nHost: example.com\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\n"+strings.Repeat("x", size))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			var got []byte
			if got, err = io.ReadAll(resp.Body); err == nil {
				t.Errorf("request body of %d bytes: the response ended normally with %q", size, got)
			}
		}
		_ = c.Close()
	}
}
