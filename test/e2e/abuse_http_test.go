package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// smuggled is the request every smuggling vector carries after itself: if anything answers it,
// or the backend ever sees its path, the proxy and some parser disagreed about where a request
// ends.
const smuggled = "GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n"

// TestAbuseRequestSmuggling sends request-smuggling vectors to the real binary: each is refused
// with one response (400, or 501 for a transfer coding it does not implement), the connection is
// closed, and nothing of it reaches the backend, which counts every connection and request.
func TestAbuseRequestSmuggling(t *testing.T) {
	b := startCountingBackend(t)
	port := freePort(t)
	s := startServe(t, abuseFiles(t, b, port, 0))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	awaitServed(t, addr)
	base := s.peakRSS()
	conns0, reqs0 := b.conns.Load(), b.requests.Load()

	t.Run("header framing", func(t *testing.T) {
		for _, tc := range []struct {
			name, raw string
			status    int
		}{
			{"CL.TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG", 400},
			{"TE.CL", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n", 400},
			{"TE.TE obfuscated", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-encoding: x\r\n\r\n0\r\n\r\n", 400},
			{"TE with a space before the colon", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400},
			{"TE xchunked", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 501},
			{"TE chunked, identity", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 501},
			{"duplicate Content-Length, differing", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400},
			{"duplicate Content-Length, equal", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd", 400},
			{"Content-Length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4, 4\r\n\r\nabcd", 400},
			{"Content-Length with a sign", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +4\r\n\r\nabcd", 400},
			{"Content-Length hex", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x4\r\n\r\nabcd", 400},
			{"Content-Length overflow", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
			{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n 2\r\n\r\n", 400},
			{"obs-fold of Transfer-Encoding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n", 400},
			{"bare LF", "GET / HTTP/1.1\nHost: a\n\n", 400},
			{"bare LF after one field", "GET / HTTP/1.1\r\nHost: a\nX-A: 1\r\n\r\n", 400},
			{"bare CR", "GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\rX-B: 2\r\n\r\n", 400},
			{"NUL in a value", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n", 400},
			{"space in a name", "GET / HTTP/1.1\r\nHost: a\r\nX A: 1\r\n\r\n", 400},
			{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
			{"chunked on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
			{"double space in the request line", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
		} {
			t.Run(tc.name, func(t *testing.T) {
				statuses, closed := rawExchange(t, addr, tc.raw+smuggled, 5*time.Second)
				if !slices.Equal(statuses, []int{tc.status}) || !closed {
					t.Fatalf("statuses %v (closed %v), want [%d] and the connection closed", statuses, closed, tc.status)
				}
			})
		}
		if c, r := b.conns.Load()-conns0, b.requests.Load()-reqs0; c != 0 || r != 0 {
			t.Errorf("the backend got %d connections and %d requests (paths %v), want none", c, r, b.seen())
		}
	})

	// A chunked body is streamed: its header may have gone upstream before a bad chunk line
	// arrives. The bound is that the backend never gets a whole body nor the smuggled request,
	// and the client gets one answer (400 when nothing was forwarded yet) and a close.
	t.Run("chunked body", func(t *testing.T) {
		complete0 := b.complete.Load()
		for _, tc := range []struct{ name, body string }{
			{"size not hex", "zz\r\nabc\r\n0\r\n\r\n"},
			{"negative size", "-3\r\nabc\r\n0\r\n\r\n"},
			{"0x prefix", "0x3\r\nabc\r\n0\r\n\r\n"},
			{"size overflow", "1000000000000000000003\r\nabc\r\n0\r\n\r\n"},
			{"bare LF after the size", "3\nabc\r\n0\r\n\r\n"},
			{"bare CR in an extension", "3;a\rb\r\nabc\r\n0\r\n\r\n"},
			{"control character in an extension", "3;\x19\r\nabc\r\n0\r\n\r\n"},
			{"data longer than its size", "3\r\nabcdef\r\n0\r\n\r\n"},
			{"no CRLF after the data", "3\r\nabc0\r\n\r\n"},
			{"malformed trailer", "3\r\nabc\r\n0\r\nX-A : 1\r\n\r\n"},
			{"bare LF in the last chunk", "0\n\n"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				statuses, closed := rawExchange(t, addr,
					"POST /body HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"+tc.body+smuggled, 5*time.Second)
				if len(statuses) > 1 || !closed || (len(statuses) == 1 && statuses[0] < 400) {
					t.Fatalf("statuses %v (closed %v), want one error at most and the connection closed", statuses, closed)
				}
			})
		}
		if n := b.complete.Load() - complete0; n != 0 {
			t.Errorf("the backend read %d whole bodies of malformed chunked requests", n)
		}
		if slices.Contains(b.seen(), "/smuggled") {
			t.Errorf("the smuggled request reached the backend: %v", b.seen())
		}
	})
	s.reportRSS("request smuggling", base)
}

// TestAbuseSlowClients holds many connections open the slow way: a header that trickles in
// (slowloris) is cut off at --proxy-read-header-timeout, a body that stalls at
// --proxy-request-body-timeout, an idle keep-alive connection at the idle timeout's parking; all the
// while a normal client is served.
func TestAbuseSlowClients(t *testing.T) {
	b := startCountingBackend(t)
	port := freePort(t)
	s := startServe(t, abuseFiles(t, b, port, 0), "--proxy-read-header-timeout", "1s", "--proxy-request-body-timeout", "1s")
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	awaitServed(t, addr)
	base := s.peakRSS()
	const n = 200

	t.Run("slowloris", func(t *testing.T) {
		conns := dialMany(t, addr, n)
		var wg sync.WaitGroup
		lived := make([]time.Duration, n)
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n")
				for time.Since(start) < 10*time.Second {
					if _, err := io.WriteString(c, "X-A: 1\r\n"); err != nil {
						break
					}
					_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
					if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
						break
					}
				}
				lived[i] = time.Since(start)
			}()
		}
		servedMeanwhile(t, addr)
		wg.Wait()
		if longest := slices.Max(lived); longest > 4*time.Second {
			t.Fatalf("a slowloris connection lived %s, want about the 1s header timeout", longest)
		}
		s.reportRSS("slowloris (200 conns)", base)
	})

	t.Run("slow body", func(t *testing.T) {
		complete0 := b.complete.Load()
		conns := dialMany(t, addr, n)
		var wg sync.WaitGroup
		lived := make([]time.Duration, n)
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n0123456789")
				_, _ = awaitClosed(c, 10*time.Second)
				lived[i] = time.Since(start)
			}()
		}
		servedMeanwhile(t, addr)
		wg.Wait()
		if longest := slices.Max(lived); longest > 4*time.Second {
			t.Fatalf("a stalled body's connection lived %s, want about the 1s body timeout", longest)
		}
		if got := b.complete.Load() - complete0; got != 0 {
			t.Errorf("the backend read %d whole bodies of stalled requests", got)
		}
		s.reportRSS("slow body (200 conns)", base)
	})
}

// TestAbuseConnectionCap opens more idle connections than --proxy-max-connections: those beyond the
// cap are closed at once and counted, and once some close, new clients are served again.
func TestAbuseConnectionCap(t *testing.T) {
	b := startCountingBackend(t)
	port := freePort(t)
	const limit = 100
	s := startServe(t, abuseFiles(t, b, port, 0), "--proxy-max-connections", fmt.Sprint(limit))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	awaitServed(t, addr)
	base := s.peakRSS()
	eventually(t, 10*time.Second, "idle client connections gone", func() error {
		if n := s.listenerStats(port, "HTTP")["connections_active"]; n != 0 {
			return fmt.Errorf("%d open", n)
		}
		return nil
	})

	idle := dialMany(t, addr, limit)
	eventually(t, 10*time.Second, "the idle connections counted", func() error {
		if n := s.listenerStats(port, "HTTP")["connections_active"]; n != limit {
			return fmt.Errorf("%d open, want %d", n, limit)
		}
		return nil
	})
	const extra = 50
	for i := range extra {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := awaitClosed(c, 5*time.Second); err != nil {
			t.Fatalf("connection %d beyond the cap: %v", limit+i+1, err)
		}
		_ = c.Close()
	}
	series := fmt.Sprintf(`coxswain_proxy_listener_connections_rejected_cap_total{listener="127.0.0.1:%d/HTTP"}`, port)
	if got := s.metric(series); got != extra {
		t.Errorf("%s = %v, want %d", series, got, extra)
	}
	s.awaitLog("the cap is logged", "connection cap reached", "max_connections")
	for _, c := range idle[:10] {
		_ = c.Close()
	}
	eventually(t, 10*time.Second, "served again below the cap", func() error {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + addr + "/again")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	s.reportRSS("connection cap (100 idle+50)", base)
}

// TestAbuseHeaderFloods sends headers too large, too many fields, request lines too long, empty
// lines without end and a pipelined request flood: each is answered with the status it proves
// (431 over --proxy-max-header-bytes, 64 KiB, or --proxy-max-header-fields, 200) and the
// connection closed, and the proxy's memory stays bounded.
func TestAbuseHeaderFloods(t *testing.T) {
	b := startCountingBackend(t)
	port := freePort(t)
	s := startServe(t, abuseFiles(t, b, port, 0))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	awaitServed(t, addr)
	base := s.peakRSS()
	reqs0 := b.requests.Load()

	for _, tc := range []struct {
		name, raw string
		status    int
	}{
		{"one 1 MiB field", "GET / HTTP/1.1\r\nHost: a\r\nX-A: " + strings.Repeat("a", 1<<20) + "\r\n\r\n", 431},
		{"20000 small fields", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: 1\r\n", 20000) + "\r\n", 431},
		{"201 fields (2 KiB)", "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: 1\r\n", 200) + "\r\n", 431},
		{"a 1 MiB request target", "GET /" + strings.Repeat("a", 1<<20) + " HTTP/1.1\r\nHost: a\r\n\r\n", 431},
		{"a 1 MiB method", strings.Repeat("G", 1<<20) + " / HTTP/1.1\r\nHost: a\r\n\r\n", 431},
		{"1 MiB of empty lines", strings.Repeat("\r\n", 1<<19) + "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			statuses, closed := rawExchange(t, addr, tc.raw, 10*time.Second)
			if !slices.Equal(statuses, []int{tc.status}) || !closed {
				t.Fatalf("statuses %v (closed %v), want [%d] and the connection closed", statuses, closed, tc.status)
			}
		})
	}
	if r := b.requests.Load() - reqs0; r != 0 {
		t.Errorf("the backend got %d requests, want none", r)
	}
	t.Run("fields under the limit are served", func(t *testing.T) {
		statuses, _ := rawExchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\n"+strings.Repeat("X-A: 1\r\n", 198)+"Connection: close\r\n\r\n", 10*time.Second)
		if !slices.Equal(statuses, []int{200}) {
			t.Fatalf("statuses %v, want [200]", statuses)
		}
	})
	t.Run("pipelined flood", func(t *testing.T) {
		const n = 5000
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			w := bufio.NewWriter(c)
			for range n {
				_, _ = w.WriteString("GET /p HTTP/1.1\r\nHost: a\r\n\r\n")
			}
			_ = w.Flush()
		}()
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		br := bufio.NewReader(c)
		for i := range n {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("response %d: status %d", i, resp.StatusCode)
			}
		}
	})
	s.reportRSS("header and request-line floods", base)
}

// dialMany opens n connections to addr, closed when the test ends.
func dialMany(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns[i] = c
	}
	return conns
}

// servedMeanwhile checks that a normal client is served while an attack holds connections.
func servedMeanwhile(t *testing.T, addr string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	for i := range 5 {
		resp, err := c.Get("http://" + addr + "/meanwhile")
		if err != nil {
			t.Fatalf("request %d during the attack: %v", i, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d during the attack: status %d", i, resp.StatusCode)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return asNetError(err, &ne) && ne.Timeout()
}
