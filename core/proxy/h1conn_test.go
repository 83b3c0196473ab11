package proxy_test

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// Expect: 100-continue is left to the upstream: one that refuses the request before reading the
// body gets its answer to the client with no 100 before it, and the connection then closes (the
// client may or may not send the body); one that reads it gets the body after a 100.
func TestH1ExpectContinueForwarded(t *testing.T) {
	be := newBackend(t, "exp", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/deny" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	addr := rawProxy(t, &testBackend{name: "raw", port: be.port})

	c := dialClient(t, addr, false)
	_, _ = io.WriteString(c, "POST /deny HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("response %v, %v; want 401 and no 100 first", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if !resp.Close {
		t.Error("no Connection: close after an unmet expectation")
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection stayed open")
	}

	c = dialClient(t, addr, false)
	_, _ = io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
	br = bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("interim %q, %v", line, err)
	}
	_, _ = br.ReadString('\n')
	_, _ = io.WriteString(c, "abc")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "abc" {
		t.Fatalf("status %d body %q", resp.StatusCode, b)
	}
}

// The request header size limit is MaxHeaderBytes: beyond it, 431 and a close.
func TestH1MaxHeaderBytes(t *testing.T) {
	addr := h1Proxy(t, proxy.Limits{MaxHeaderBytes: 1024})
	for _, tc := range []struct {
		name   string
		value  int
		status int
	}{{"under", 512, 200}, {"over", 2048, 431}} {
		t.Run(tc.name, func(t *testing.T) {
			resps, closed := exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nX-A: "+strings.Repeat("a", tc.value)+"\r\nConnection: close\r\n\r\n")
			if len(resps) != 1 || resps[0].StatusCode != tc.status || !closed {
				t.Fatalf("%d responses, closed %v", len(resps), closed)
			}
		})
	}
}

// Connection: close is honoured both ways, and neither side's reaches the other: the client's
// closes the client connection (and says so), not the upstream one; the upstream's closes the
// upstream connection, not the client's.
func TestH1ConnectionClose(t *testing.T) {
	var upstreamClose atomic.Value
	upstreamClose.Store("")
	be, conns := rawBackend(t, func(_ int64, r *http.Request) (string, bool) {
		upstreamClose.Store(r.Header.Get("Connection"))
		if r.URL.Path == "/close" {
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", true
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	addr := rawProxy(t, be)

	t.Run("client", func(t *testing.T) {
		before := conns.Load()
		for range 2 {
			resps, closed := exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\nHost: a\r\n\r\n")
			if len(resps) != 1 || !resps[0].Close || !closed {
				t.Fatalf("%d responses, Connection: close %v, closed %v", len(resps), len(resps) > 0 && resps[0].Close, closed)
			}
		}
		if got := conns.Load() - before; got > 1 || upstreamClose.Load() != "" {
			t.Fatalf("%d new upstream connections, upstream saw Connection %q", got, upstreamClose.Load())
		}
	})
	t.Run("upstream", func(t *testing.T) {
		before := conns.Load()
		resps, closed := exchange(t, addr, "GET /close HTTP/1.1\r\nHost: a\r\n\r\nGET /close HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		if len(resps) != 3 || !closed {
			t.Fatalf("%d responses, closed %v", len(resps), closed)
		}
		for i, r := range resps[:2] {
			if r.Close || r.StatusCode != 200 {
				t.Errorf("response %d: status %d, Connection: close passed to the client", i, r.StatusCode)
			}
		}
		if got := conns.Load() - before; got < 2 {
			t.Fatalf("%d new upstream connections after two that closed", got)
		}
	})
	t.Run("HTTP/1.0", func(t *testing.T) {
		resps, closed := exchange(t, addr, "GET / HTTP/1.0\r\n\r\nGET /never HTTP/1.0\r\n\r\n")
		if len(resps) != 1 || !closed {
			t.Fatalf("without keep-alive: %d responses, closed %v", len(resps), closed)
		}
		resps, closed = exchange(t, addr, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET / HTTP/1.0\r\n\r\n")
		if len(resps) != 2 || !closed || resps[0].Header.Get("Connection") != "keep-alive" {
			t.Fatalf("with keep-alive: %d responses, closed %v", len(resps), closed)
		}
	})
}

// Responses that have no body (to HEAD, 204, 304) send none whatever their headers say, so the
// next pipelined response is read where it starts; HEAD keeps the upstream's Content-Length.
func TestH1BodilessResponses(t *testing.T) {
	be, _ := rawBackend(t, func(_ int64, r *http.Request) (string, bool) {
		switch r.URL.Path {
		case "/204":
			return "HTTP/1.1 204 No Content\r\n\r\n", false
		case "/304":
			return "HTTP/1.1 304 Not Modified\r\nEtag: \"x\"\r\n\r\n", false
		}
		if r.Method == http.MethodHead {
			return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false
	})
	c := dialClient(t, rawProxy(t, be), false)
	_, _ = io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: a\r\n\r\nGET /204 HTTP/1.1\r\nHost: a\r\n\r\n"+
		"GET /304 HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	for _, want := range []struct {
		method string
		status int
		length int64
		body   string
	}{{"HEAD", 200, 5, ""}, {"GET", 204, 0, ""}, {"GET", 304, -1, ""}, {"GET", 200, 5, "hello"}} {
		resp, err := http.ReadResponse(br, &http.Request{Method: want.method})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want.status || string(b) != want.body || (want.length >= 0 && resp.ContentLength != want.length) {
			t.Fatalf("%s: status %d length %d body %q, want %d %d %q", want.method, resp.StatusCode, resp.ContentLength, b, want.status, want.length, want.body)
		}
	}
}

// A client that stalls in the middle of a body is cut off after RequestBodyTimeout (408, then a
// close: slowloris on the body); one that keeps sending, however slowly, is not.
func TestH1RequestBodyTimeout(t *testing.T) {
	addr := h1Proxy(t, proxy.Limits{RequestBodyTimeout: 200 * time.Millisecond})
	t.Run("stalled", func(t *testing.T) {
		c := dialClient(t, addr, false)
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nhello")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusRequestTimeout {
			t.Fatalf("%v %v, want 408", resp, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("the connection stayed open")
		}
	})
	t.Run("trickling", func(t *testing.T) {
		// Its own proxy with a longer timeout, so a byte every 100 ms keeps a 5x margin on a
		// loaded machine (a 60 ms pace against 200 ms flaked at load average 15) while the whole
		// body (800 ms) still takes longer than the timeout: the deadline is per read, not per body.
		addr := h1Proxy(t, proxy.Limits{RequestBodyTimeout: time.Second / 2})
		c := dialClient(t, addr, false)
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 8\r\n\r\n")
		for range 8 {
			time.Sleep(100 * time.Millisecond) // pacing: 800 ms in all, a byte every 100 ms
			_, _ = io.WriteString(c, "x")
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Got-Body") != "xxxxxxxx" {
			t.Fatalf("%v %v", resp, err)
		}
	})
}
