package h1server

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1wire"
)

// upstreamHead parses raw as an upstream response head, as the forwarder does.
func upstreamHead(t *testing.T, raw string) *h1wire.Head {
	t.Helper()
	hd := &h1wire.Head{}
	if err := hd.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatalf("parse %q: %v", raw, err)
	}
	return hd
}

// TestPassHead: a length-framed upstream head goes out as it came, less its hop-by-hop fields and
// those its Connection header names, with the writer's framing kept (a write past the length
// fails; the connection is kept); heads the map must decide on are declined, untouched.
func TestPassHead(t *testing.T) {
	const passed = "HTTP/1.1 201 Created\r\nX-First: 1\r\nconnection: x-hop, keep-alive\r\nKeep-Alive: timeout=5\r\n" +
		"X-Hop: secret\r\nContent-Length: 5\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\nx-last: a, b\r\nX-First: 2\r\n\r\n"
	declined := map[string]string{
		"/chunked":  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"/trailer":  "HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 5\r\n\r\n",
		"/nolength": "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
		"/304":      "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
	}
	addr := serveLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		hw := w.(*Writer)
		switch r.URL.Path {
		case "/passed":
			if !hw.PassHead(upstreamHead(t, passed)) {
				t.Error("a length-framed head was declined")
			}
			if n, err := io.WriteString(w, "hello!"); err == nil || n != 0 {
				t.Errorf("a write past the head's length: %d, %v; want ErrContentLength", n, err)
			}
			_, _ = io.WriteString(w, "hello")
		case "/mapped":
			w.Header().Set("X-Filter", "1")
			if hw.PassHead(upstreamHead(t, passed)) {
				t.Error("PassHead took a head though the map has fields")
			}
			_, _ = io.WriteString(w, "mapped")
		default:
			if hw.PassHead(upstreamHead(t, declined[r.URL.Path])) {
				t.Errorf("%s: PassHead took the head", r.URL.Path)
			}
			w.WriteHeader(http.StatusAccepted)
		}
	})
	rc := dialRaw(t, addr)
	if _, err := io.WriteString(rc.c, "GET /passed HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	var head strings.Builder
	for {
		line, err := rc.br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		head.WriteString(line)
		if line == "\r\n" {
			break
		}
	}
	const want = "HTTP/1.1 201 Created\r\nX-First: 1\r\nContent-Length: 5\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n" +
		"X-Last: a, b\r\nX-First: 2\r\n\r\n"
	if head.String() != want {
		t.Fatalf("head:\n%q\nwant\n%q", head.String(), want)
	}
	body := make([]byte, 5)
	if _, err := io.ReadFull(rc.br, body); err != nil || string(body) != "hello" {
		t.Fatalf("body %q, %v", body, err)
	}
	// The connection carries on: the next responses come whole, through the map.
	resp, got := rc.get(t, "/mapped")
	if got != "mapped" || resp.Header.Get("X-Filter") != "1" || resp.Header.Get("X-First") != "" {
		t.Errorf("/mapped: %q, header %v", got, resp.Header)
	}
	for path := range declined {
		if resp, _ := rc.get(t, path); resp.StatusCode != http.StatusAccepted {
			t.Errorf("%s: status %d, want the handler's 202", path, resp.StatusCode)
		}
	}
}
