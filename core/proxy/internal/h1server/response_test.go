package h1server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// serveLoopback serves h on a loopback socket with the own server and returns its address.
func serveLoopback(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Handler: h, MaxHeaderBytes: 8 << 10, MaxHeaderFields: 64, ReadHeaderTimeout: 5 * time.Second,
		Log: zap.NewNop()})
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// rawClient is one client connection that writes raw requests and reads what comes back.
type rawClient struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	return &rawClient{c: c, br: bufio.NewReader(c)}
}

// get sends a GET for path and reads the response with net/http's parser.
func (rc *rawClient) get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(rc.c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s body: %v", path, err)
	}
	return resp, string(body)
}

// closed reports whether the server ends the connection with nothing more sent.
func (rc *rawClient) closed(t *testing.T) bool {
	t.Helper()
	b, err := rc.br.ReadByte()
	if err == nil {
		t.Errorf("byte %q after the response", b)
		return false
	}
	return errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")
}

// TestWriterFraming: a declared Content-Length frames the body as written (committed at the first
// write), an undeclared short body gets its length, a long one is chunked; each keeps the
// connection.
func TestWriterFraming(t *testing.T) {
	long := strings.Repeat("x", pendingMax+1)
	addr := serveLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/declared":
			w.Header().Set("Content-Length", "11")
			_, _ = io.WriteString(w, "hello")
			_, _ = io.WriteString(w, " world")
		case "/short":
			_, _ = io.WriteString(w, "short")
		case "/long":
			_, _ = io.WriteString(w, long)
		}
	})
	rc := dialRaw(t, addr)
	for _, tc := range []struct {
		path, body string
		length     int64
		chunked    bool
	}{
		{"/declared", "hello world", 11, false},
		{"/short", "short", 5, false},
		{"/long", long, -1, true},
		{"/declared", "hello world", 11, false},
	} {
		resp, body := rc.get(t, tc.path)
		if body != tc.body || resp.ContentLength != tc.length || (len(resp.TransferEncoding) > 0) != tc.chunked {
			t.Errorf("%s: %d bytes, length %d, transfer encoding %v; want %d bytes, length %d, chunked %v",
				tc.path, len(body), resp.ContentLength, resp.TransferEncoding, len(tc.body), tc.length, tc.chunked)
		}
		if resp.Close {
			t.Errorf("%s: the connection closes", tc.path)
		}
	}
}

// TestWriterNeverExceedsLength: a handler that writes more than the Content-Length it declared,
// before or after declaring it, never puts a byte beyond the framing on the wire (the next
// response would start inside it).
func TestWriterNeverExceedsLength(t *testing.T) {
	writeErr := make(chan error, 1)
	addr := serveLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/over":
			w.Header().Set("Content-Length", "5")
			_, err := io.WriteString(w, "hello world")
			writeErr <- err
		case "/late":
			_, _ = io.WriteString(w, "hello world")
			w.Header().Set("Content-Length", "5") // after the body began: not the framing
		}
	})

	rc := dialRaw(t, addr)
	resp, body := rc.get(t, "/late")
	if body != "hello world" || resp.ContentLength != 11 {
		t.Errorf("/late: %q with length %d; want the 11 bytes written, framed by their length", body, resp.ContentLength)
	}

	rc = dialRaw(t, addr)
	if _, err := io.WriteString(rc.c, "GET /over HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := <-writeErr; !errors.Is(err, http.ErrContentLength) {
		t.Errorf("writing past the declared length: %v; want http.ErrContentLength", err)
	}
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Content-Length"); got != "5" {
		t.Errorf("Content-Length %q, want 5", got)
	}
	// The body never came: the server closes rather than leave the client waiting for it.
	if b, err := io.ReadAll(resp.Body); err == nil || len(b) != 0 {
		t.Errorf("body %q, %v; want nothing and an unexpected end", b, err)
	}
	if !rc.closed(t) {
		t.Error("the connection stays open after a short body")
	}
}

// TestPipelinedRequestsAnswered: requests sent back to back before any answer are each answered in
// order, on one connection.
func TestPipelinedRequestsAnswered(t *testing.T) {
	addr := serveLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	})
	rc := dialRaw(t, addr)
	var reqs strings.Builder
	for i := range 5 {
		reqs.WriteString("GET /" + strconv.Itoa(i) + " HTTP/1.1\r\nHost: a\r\n\r\n")
	}
	if _, err := io.WriteString(rc.c, reqs.String()); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		resp, err := http.ReadResponse(rc.br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if want := "/" + strconv.Itoa(i); string(body) != want {
			t.Errorf("response %d: %q, want %q", i, body, want)
		}
	}
}
