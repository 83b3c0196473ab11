package proxy_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// h1Proxy serves one catch-all route to an echo backend that reports the request it got, with the
// given limits, and returns the listener address.
func h1Proxy(t *testing.T, limits proxy.Limits) string {
	t.Helper()
	be := newBackend(t, "be", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Got-Body", string(body))
		w.Header().Set("X-Got-Uri", r.RequestURI)
		w.Header().Set("X-Got-Host", r.Host)
		_, _ = io.WriteString(w, "ok")
	})
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: registry(), Limits: limits})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	l := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("be", be)}))
	return addrOf(t, p, l.Name)
}

// exchange writes raw bytes on a new connection and reads every response until the server closes
// it or the deadline passes.
func exchange(t *testing.T, addr, raw string) ([]*http.Response, bool) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []*http.Response
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			timedOut := err != nil && strings.Contains(err.Error(), "timeout") || (ok(err, &ne) && ne.Timeout())
			return out, !timedOut // closed by the server unless we timed out
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		out = append(out, resp)
	}
}

func ok(err error, ne *net.Error) bool {
	v, is := err.(net.Error) //nolint:errorlint // test helper
	if is {
		*ne = v
	}
	return is
}

func TestH1ServerRejectsAmbiguousRequests(t *testing.T) {
	addr := h1Proxy(t, proxy.Limits{})
	cases := []struct {
		name   string
		raw    string
		status int
	}{
		{"length and chunked", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"chunked and length", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n", 400},
		{"two lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
		{"length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3,3\r\n\r\nabc", 400},
		{"negative length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400},
		{"other coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
		{"chunked twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"chunked on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n", 400},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"bad Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"NUL in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n", 400},
		{"bare CR in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n", 400},
		{"space in the target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"HTTP/2.0 request line", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		{"lower-case version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400},
		{"bad method", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		{"header too large", "GET / HTTP/1.1\r\nHost: a\r\nX-A: " + strings.Repeat("a", 70<<10) + "\r\n\r\n", 431},
		{"equal lengths", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400},
		{"empty Transfer-Encoding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n", 400},
		{"bare LF", "GET / HTTP/1.1\nHost: a\n\n", 400},
		{"bare LF ending a field", "GET / HTTP/1.1\r\nHost: a\nX-A: 1\r\n\r\n", 400},
		{"empty lines without end", strings.Repeat("\r\n", 40<<10) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 431},
		{"too many fields", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: 1\r\n", 200) + "\r\n", 431},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A second, valid request follows: it must never be answered (no desync).
			resps, closed := exchange(t, addr, tc.raw+"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
			if len(resps) != 1 || resps[0].StatusCode != tc.status || !closed {
				var got []int
				for _, r := range resps {
					got = append(got, r.StatusCode)
				}
				t.Fatalf("statuses %v (closed %v), want [%d] and a close", got, closed, tc.status)
			}
		})
	}
}

func TestH1ServerBadChunkedBody(t *testing.T) {
	addr := h1Proxy(t, proxy.Limits{})
	for _, body := range []string{"zz\r\nabc\r\n0\r\n\r\n", "3\r\nabcX\r\n0\r\n\r\n", "3\r\nabc\r\n0\r\nX-A : 1\r\n\r\n"} {
		resps, closed := exchange(t, addr, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"+body+
			"GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n")
		if !closed || len(resps) > 1 || (len(resps) == 1 && resps[0].StatusCode == 200) {
			t.Errorf("body %q: %d responses, closed %v", body, len(resps), closed)
		}
	}
}

func TestH1ServerKeepAliveAndBodies(t *testing.T) {
	addr := h1Proxy(t, proxy.Limits{})
	raw := "GET /a?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n" +
		"POST /b HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello" +
		"POST /c HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n" +
		"GET /%7Ed%20e HTTP/1.1\r\nHost: example.com\r\n\r\n" +
		"GET http://other.example/f HTTP/1.1\r\nHost: example.com\r\n\r\n" +
		"GET /g HTTP/1.0\r\nConnection: keep-alive\r\nHost: example.com\r\n\r\n" +
		"GET /last HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"
	resps, closed := exchange(t, addr, raw)
	want := []struct{ uri, body, host string }{
		{"/a?x=1", "", "example.com"}, {"/b", "hello", "example.com"}, {"/c", "abcde", "example.com"},
		{"/%7Ed%20e", "", "example.com"}, {"/f", "", "other.example"}, {"/g", "", "example.com"}, {"/last", "", "example.com"},
	}
	if len(resps) != len(want) || !closed {
		t.Fatalf("%d responses (closed %v), want %d", len(resps), closed, len(want))
	}
	for i, w := range want {
		r := resps[i]
		if r.StatusCode != 200 || r.Header.Get("X-Got-Uri") != w.uri || r.Header.Get("X-Got-Body") != w.body || r.Header.Get("X-Got-Host") != w.host {
			t.Errorf("request %d: status %d uri %q body %q host %q", i, r.StatusCode, r.Header.Get("X-Got-Uri"), r.Header.Get("X-Got-Body"), r.Header.Get("X-Got-Host"))
		}
	}
}

func TestH1ServerExpectContinue(t *testing.T) {
	addr := h1Proxy(t, proxy.Limits{})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("interim %q, %v", line, err)
	}
	_, _ = br.ReadString('\n')
	_, _ = io.WriteString(c, "abc")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Got-Body") != "abc" {
		t.Fatalf("response %v, %v", resp, err)
	}
}

// An idle connection is parked (buffers and goroutine released) after ReadHeaderTimeout and still
// serves its next request; it is closed after IdleTimeout.
func TestH1ServerParksIdleConnections(t *testing.T) {
	// The header window (250 ms) is shorter than the idle wait before the slow header (300 ms),
	// which the idle timeout (1 s) allows; the 30 ms pause inside the header leaves the window
	// 220 ms of slack, so a loaded machine's scheduling does not cut the header off.
	addr := h1Proxy(t, proxy.Limits{ReadHeaderTimeout: 250 * time.Millisecond, IdleTimeout: time.Second})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	get := func() error {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
			return err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	for i := range 3 {
		if err := get(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		time.Sleep(150 * time.Millisecond) // parked by now
	}
	// A slow header that starts after longer idle than the header window still gets a whole window.
	time.Sleep(300 * time.Millisecond)
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\n")
	time.Sleep(30 * time.Millisecond)
	_, _ = io.WriteString(c, "Host: a\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("slow header: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF { //nolint:errorlint // io.EOF is returned unwrapped
		t.Fatalf("after the idle timeout: %v, want EOF", err)
	}
}

// A header that trickles in is cut off by ReadHeaderTimeout (slowloris).
func TestH1ServerHeaderTimeout(t *testing.T) {
	addr := h1Proxy(t, proxy.Limits{ReadHeaderTimeout: 100 * time.Millisecond})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\n")
	start := time.Now()
	for range 20 {
		if _, err := io.WriteString(c, "X-A: 1\r\n"); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := io.ReadAll(c); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("connection lived %s", d)
	}
}

// HTTP/1.1 over TLS goes through the same server, with the TLS state on the request.
func TestH1ServerOverTLS(t *testing.T) {
	be := newBackend(t, "be", nil)
	p := newProxy(t)
	l := httpsListener(0, tlsServer("", []string{"ns/c"}, vhost("", route("r", "/", backend("be", 1)))))
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("be", be)}, secret(t, "ns/c", "c", "example.com")))
	c := newClient(addrOf(t, p, l.Name), nil)
	for range 3 {
		r := must(t, c.get(hostURL("https", "example.com", "/")))
		if r.status != 200 || r.proto != 1 || r.header.Get("X-Got-XF-Proto") != "https" {
			t.Fatalf("status %d proto %d X-Forwarded-Proto %q", r.status, r.proto, r.header.Get("X-Got-XF-Proto"))
		}
	}
	if n := c.dials.Load(); n != 1 {
		t.Fatalf("%d connections for 3 keep-alive requests", n)
	}
}

// A connection that was opened and never used (net/http's Transport keeps such connections when
// a dial loses its race with an idle one) is idle to Shutdown: Close returns without waiting out
// the header timeout, on a listener that also takes cleartext HTTP/2 (whose preface check reads
// first).
func TestH1ServerShutdownClosesUnusedConnections(t *testing.T) {
	be := newBackend(t, "be", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: registry(), Limits: proxy.Limits{ReadHeaderTimeout: time.Hour}})
	l := httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("be", be)}))
	c, err := net.Dial("tcp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close with an unused connection open: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF { //nolint:errorlint // io.EOF is returned unwrapped
		t.Fatalf("unused connection after Close: %v, want EOF", err)
	}
}
