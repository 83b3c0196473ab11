package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// rawBackend is an upstream that reads each request header and answers with the bytes reply
// returns for it (the n-th request on the server, from 1), closing the connection when close says
// so. It lets a test send what no well-behaved server would.
func rawBackend(t *testing.T, reply func(n int64, r *http.Request) (resp string, close bool)) (*testBackend, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var n, conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, r.Body)
					resp, closeAfter := reply(n.Add(1), r)
					if _, err := io.WriteString(c, resp); err != nil || closeAfter {
						return
					}
				}
			}()
		}
	}()
	return &testBackend{name: "raw", port: portOf(t, ln.Addr().String())}, &conns
}

func rawProxy(t *testing.T, be *testBackend) string {
	t.Helper()
	l := httpListener(0, server("", vhost("", route("r", "/", backend("raw", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("raw", be)}))
	return addrOf(t, p, l.Name)
}

func TestFastPathRejectsBadResponses(t *testing.T) {
	cases := []struct{ name, resp string }{
		{"length and chunked", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX-A: a\r\n folded\r\nContent-Length: 0\r\n\r\n"},
		{"other transfer coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"},
		{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n"},
		{"garbage", "SSH-2.0-OpenSSH\r\n\r\n"},
		{"unasked upgrade", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			be, _ := rawBackend(t, func(int64, *http.Request) (string, bool) { return tc.resp, false })
			c := newClient(rawProxy(t, be), nil)
			r := must(t, c.get(hostURL("http", "example.com", "/")))
			if r.status != http.StatusBadGateway {
				t.Fatalf("status %d, want 502 (body %q)", r.status, r.body)
			}
		})
	}
}

func TestFastPathBodyFraming(t *testing.T) {
	cases := []struct {
		name, method, resp string
		status             int
		body               string
		trailer            string
		reuse              bool // the upstream connection is kept for the next request
	}{
		{"length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 200, "hello", "", true},
		{"chunked with trailer", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nhel\r\n2;ext=1\r\nlo\r\n0\r\nX-Sum: abc\r\n\r\n", 200, "hello", "abc", true},
		{"until close", "GET", "HTTP/1.0 200 OK\r\n\r\nhello", 200, "hello", "", false},
		{"HEAD ignores the length", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", 200, "", "", true},
		{"204 has no body", "GET", "HTTP/1.1 204 No Content\r\n\r\n", 204, "", "", true},
		{"304 has no body", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", 304, "", "", true},
		{"interim then final", "GET", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 200, "ok", "", true},
		{"connection close", "GET", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 200, "ok", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			be, conns := rawBackend(t, func(int64, *http.Request) (string, bool) { return tc.resp, !tc.reuse })
			c := newClient(rawProxy(t, be), nil)
			for i := range 2 {
				req, _ := http.NewRequest(tc.method, hostURL("http", "example.com", "/"), nil)
				r := must(t, c.do(req))
				if r.status != tc.status || r.body != tc.body || r.trailer.Get("X-Sum") != tc.trailer {
					t.Fatalf("request %d: status %d body %q trailer %v", i, r.status, r.body, r.trailer)
				}
			}
			want := int64(1)
			if !tc.reuse {
				want = 2
			}
			if got := conns.Load(); got != want {
				t.Errorf("%d upstream connections, want %d", got, want)
			}
		})
	}
}

func TestFastPathTruncatedBodyAborts(t *testing.T) {
	for _, resp := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
	} {
		be, _ := rawBackend(t, func(int64, *http.Request) (string, bool) { return resp, true })
		c := newClient(rawProxy(t, be), nil)
		if r := c.get(hostURL("http", "example.com", "/")); r.err == nil {
			t.Errorf("%q: client read a complete response %q", resp, r.body)
		}
	}
}

// A pooled connection the upstream closed while idle is replaced transparently.
func TestFastPathRetriesStaleConnection(t *testing.T) {
	be, conns := rawBackend(t, func(int64, *http.Request) (string, bool) {
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", true // closes without saying so
	})
	c := newClient(rawProxy(t, be), nil)
	for i := range 5 {
		r := must(t, c.get(hostURL("http", "example.com", "/")))
		if r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d: status %d body %q", i, r.status, r.body)
		}
		time.Sleep(5 * time.Millisecond) // let the close reach the proxy's side
	}
	if conns.Load() < 5 {
		t.Fatalf("%d upstream connections for 5 requests on closing connections", conns.Load())
	}
}

func TestFastPathRequestHeader(t *testing.T) {
	got := make(chan *http.Request, 1)
	be, _ := rawBackend(t, func(_ int64, r *http.Request) (string, bool) {
		got <- r
		return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false
	})
	c := newClient(rawProxy(t, be), nil)
	req, _ := http.NewRequest("POST", hostURL("http", "Example.com", "/"), nil)
	req.URL.Path, req.URL.RawQuery = "/p q", "x=1&y"
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("User-Agent", "")
	must(t, c.do(req))
	r := <-got
	if r.Method != "POST" || r.RequestURI != "/p%20q?x=1&y" || r.Host != "Example.com" || r.ContentLength != 0 {
		t.Fatalf("%s %s host %q length %d", r.Method, r.RequestURI, r.Host, r.ContentLength)
	}
	if r.Header.Get("X-Hop") != "" || r.Header.Get("Content-Length") != "0" || !strings.HasSuffix(r.Header.Get("X-Forwarded-For"), "127.0.0.1") {
		t.Fatalf("header %v", r.Header)
	}
	if _, ok := r.Header["User-Agent"]; ok {
		t.Errorf("User-Agent %q added", r.Header.Get("User-Agent"))
	}
}

// TestH1HeaderValuesPerRequest sends requests with different header fields on one keep-alive
// connection, through one pooled upstream connection: the server's request values and the
// response values the fast path copies are reused per connection, and no value of an earlier
// exchange may show up in a later one, either way.
func TestH1HeaderValuesPerRequest(t *testing.T) {
	be, _ := rawBackend(t, func(n int64, r *http.Request) (string, bool) {
		seen := strings.Join(r.Header.Values("X-Req"), "|") + ";" + strings.Join(r.Header.Values("X-Extra"), "|")
		if n%2 == 1 {
			return "HTTP/1.1 200 OK\r\nX-A: 1\r\nX-B: 2\r\nX-B: 3\r\nConnection: X-Hop\r\nX-Hop: h\r\nX-Seen: " + seen +
				"\r\nContent-Length: 0\r\n\r\n", false
		}
		return "HTTP/1.1 200 OK\r\nX-C: 4\r\nX-Seen: " + seen + "\r\nContent-Length: 0\r\n\r\n", false
	})
	addr := rawProxy(t, be)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	send := func(req string) http.Header {
		t.Helper()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.Header
	}
	for i := range 3 {
		h := send("GET /a HTTP/1.1\r\nHost: x\r\nX-Req: first\r\nX-Extra: e1\r\nX-Extra: e2\r\nX-Pad: p\r\n\r\n")
		if got := h.Values("X-B"); h.Get("X-A") != "1" || len(got) != 2 || got[0] != "2" || got[1] != "3" ||
			h.Get("X-Seen") != "first;e1|e2" || h.Get("X-Hop") != "" || h.Get("X-C") != "" {
			t.Fatalf("round %d, first response header %v", i, h)
		}
		h = send("GET /b HTTP/1.1\r\nHost: x\r\nX-Req: second\r\n\r\n")
		if h.Get("X-C") != "4" || h.Get("X-Seen") != "second;" || h.Get("X-A") != "" || len(h.Values("X-B")) != 0 {
			t.Fatalf("round %d, second response header %v", i, h)
		}
	}
}
