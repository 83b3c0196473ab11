package proxy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

const retryRoute = "HTTPRoute/ns/retry"

// countingBackend is a loopback backend that counts the requests it sees and answers each with
// what answer says for the n-th (from 1). It echoes a digest of the request body in X-Body-Sha.
type countingBackend struct {
	*testBackend
	seen atomic.Int64
}

func newCountingBackend(t *testing.T, name string, h2c bool, answer func(n int64, w http.ResponseWriter, r *http.Request)) *countingBackend {
	t.Helper()
	b := &countingBackend{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.seen.Add(1)
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		w.Header().Set("X-Body-Sha", hex.EncodeToString(sum[:]))
		w.Header().Set("X-Backend", name)
		if answer != nil {
			answer(n, w, r)
			return
		}
		_, _ = io.WriteString(w, name)
	})
	srv := httptest.NewUnstartedServer(handler)
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		srv.Config.Protocols = &p
	}
	srv.Start()
	t.Cleanup(srv.Close)
	b.testBackend = &testBackend{name: name, srv: srv, port: portOf(t, srv.Listener.Addr().String())}
	return b
}

// status answers every request with code.
func status(code int) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) { http.Error(w, "failing", code) }
}

// retrySetup serves one route with the given retry and timeouts to the cluster of bs.
func retrySetup(t *testing.T, rt *irv1.Retry, to *irv1.Timeouts, protocol irv1.Cluster_Protocol, bs ...*testBackend) (*client, func(reason string) float64) {
	t.Helper()
	return retrySetupPath(t, rt, to, protocol, false, bs...)
}

// retrySetupPath is retrySetup, through the stdlib reverse proxy when stdlib is set.
func retrySetupPath(t *testing.T, rt *irv1.Retry, to *irv1.Timeouts, protocol irv1.Cluster_Protocol, stdlib bool, bs ...*testBackend) (*client, func(reason string) float64) {
	t.Helper()
	r := route(retryRoute+"/rule/0/match/0", "/", backend("web", 1))
	r.Retry, r.Timeouts = rt, to
	l := httpListener(0, server("", vhost("", r)))
	web := cluster("web", bs...)
	web.Protocol = protocol
	p, reg := newMetricsProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{web}))
	if stdlib {
		proxy.StdlibPathOnly(p)
	}
	count := func(reason string) float64 {
		t.Helper()
		v, _ := metric(t, reg, "coxswain_proxy_retries_total", "route="+retryRoute, "reason="+reason)
		return v
	}
	return newClient(addrOf(t, p, l.Name), nil), count
}

// A retry lands on the second endpoint: one endpoint answers 503 (or refuses connections), the
// retry goes to the other, whichever the balancer picked first; on HTTP/1.1 clusters (fast path
// and stdlib reverse proxy) and h2c clusters.
func TestRetryLandsOnSecondEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		protocol irv1.Cluster_Protocol
		refuse   bool
		stdlib   bool
	}{
		{"h1 503", irv1.Cluster_HTTP1, false, false},
		{"h1 connection refused", irv1.Cluster_HTTP1, true, false},
		{"stdlib 503", irv1.Cluster_HTTP1, false, true},
		{"stdlib connection refused", irv1.Cluster_HTTP1, true, true},
		{"h2c 503", irv1.Cluster_H2C, false, false},
		{"h2c connection refused", irv1.Cluster_H2C, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h2c := tc.protocol == irv1.Cluster_H2C
			good := newCountingBackend(t, "good", h2c, nil)
			bad := newCountingBackend(t, "bad", h2c, status(http.StatusServiceUnavailable))
			badBE := bad.testBackend
			if tc.refuse {
				badBE = &testBackend{name: "refusing", port: closedPort(t)}
			}
			c, count := retrySetupPath(t, &irv1.Retry{Codes: []uint32{503}, Attempts: 1}, nil, tc.protocol, tc.stdlib, good.testBackend, badBE)
			const n = 10
			for i := range n {
				r := must(t, c.get("http://x/"))
				if r.status != http.StatusOK || r.body != "good" {
					t.Fatalf("request %d: %d %q, want 200 from the good endpoint", i, r.status, r.body)
				}
			}
			if good.seen.Load() != n {
				t.Errorf("good endpoint saw %d requests, want %d", good.seen.Load(), n)
			}
			// Every request that started on the bad endpoint was retried once (round robin
			// starts each on it here, since a retried request takes two picks).
			reason := "status"
			if tc.refuse {
				reason = "connect"
			}
			got := count(reason)
			if !tc.refuse && got != float64(bad.seen.Load()) {
				t.Errorf("retries{reason=status} = %v, want one per request the bad endpoint saw (%d)", got, bad.seen.Load())
			}
			if got < 1 || got > n {
				t.Errorf("retries{reason=%s} = %v, want 1 to %d", reason, got, n)
			}
		})
	}
}

// Codes not listed are answered as they are; attempts bound the retries, and the last try's
// answer is the client's; one endpoint is retried itself.
func TestRetryCodesAndAttempts(t *testing.T) {
	be := newCountingBackend(t, "be", false, func(n int64, w http.ResponseWriter, r *http.Request) {
		code := http.StatusInternalServerError
		if r.URL.Path == "/503" {
			code = http.StatusServiceUnavailable
		}
		http.Error(w, "try "+string(rune('0'+n)), code)
	})
	c, count := retrySetup(t, &irv1.Retry{Codes: []uint32{500}, Attempts: 2}, nil, irv1.Cluster_HTTP1, be.testBackend)
	if r := must(t, c.get("http://x/503")); r.status != http.StatusServiceUnavailable || be.seen.Load() != 1 {
		t.Fatalf("503 (not listed): %d after %d tries, want 503 after 1", r.status, be.seen.Load())
	}
	r := must(t, c.get("http://x/500"))
	if r.status != http.StatusInternalServerError || be.seen.Load() != 4 {
		t.Fatalf("500: %d after %d tries in all, want 500 after 1+3", r.status, be.seen.Load())
	}
	if !strings.HasPrefix(r.body, "try 4") {
		t.Errorf("body %q, want the last try's", r.body)
	}
	if got := count("status"); got != 2 {
		t.Errorf("retries{reason=status} = %v, want 2", got)
	}
}

// Once the response has started to the client, nothing is retried: a backend that sends a 200
// header and then breaks off is seen once, and the client's response is cut short.
func TestRetryNotAfterResponseStarted(t *testing.T) {
	be := newCountingBackend(t, "be", false, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})
	c, _ := retrySetup(t, &irv1.Retry{Codes: []uint32{500, 502, 503, 504}, Attempts: 3}, nil, irv1.Cluster_HTTP1, be.testBackend)
	r := c.get("http://x/")
	if r.err == nil {
		t.Fatalf("got a complete response %d %q, want one cut short", r.status, r.body)
	}
	if n := be.seen.Load(); n != 1 {
		t.Fatalf("backend saw %d requests, want 1: a started response was retried", n)
	}
}

// A request body up to 64 KiB is kept and sent again, byte for byte, on the retry (known length
// and chunked); a larger one is sent once, not retried, and counted.
func TestRetryBodyReplay(t *testing.T) {
	be := newCountingBackend(t, "be", false, func(n int64, w http.ResponseWriter, r *http.Request) {
		if n%2 == 1 || r.URL.Path == "/fail" {
			http.Error(w, "first try fails", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	c, count := retrySetup(t, &irv1.Retry{Codes: []uint32{503}, Attempts: 1}, nil, irv1.Cluster_HTTP1, be.testBackend)
	post := func(path string, size int, chunked bool) result {
		body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		var rd io.Reader = bytes.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, "http://x"+path, rd)
		r := must(t, c.do(req))
		sum := sha256.Sum256(body)
		if r.status == http.StatusOK && r.header.Get("X-Body-Sha") != hex.EncodeToString(sum[:]) {
			t.Fatalf("%d bytes (chunked %v): the retry got another body", size, chunked)
		}
		return r
	}
	for _, tc := range []struct {
		size    int
		chunked bool
	}{{1 << 10, false}, {64 << 10, false}, {16 << 10, true}, {64 << 10, true}} {
		before := be.seen.Load()
		if r := post("/", tc.size, tc.chunked); r.status != http.StatusOK {
			t.Fatalf("%d bytes (chunked %v): %d, want 200 on the retry", tc.size, tc.chunked, r.status)
		}
		if d := be.seen.Load() - before; d != 2 {
			t.Fatalf("%d bytes (chunked %v): %d tries, want 2", tc.size, tc.chunked, d)
		}
	}
	for _, chunked := range []bool{false, true} {
		before := be.seen.Load()
		if r := post("/fail", 64<<10+16, chunked); r.status != http.StatusServiceUnavailable {
			t.Fatalf("64 KiB + 16 (chunked %v): %d, want the single try's 503", chunked, r.status)
		}
		if d := be.seen.Load() - before; d != 1 {
			t.Fatalf("64 KiB + 16 (chunked %v): %d tries, want 1", chunked, d)
		}
	}
	if got := count("body_too_large"); got != 2 {
		t.Errorf("retries{reason=body_too_large} = %v, want 2", got)
	}
	if got := count("status"); got != 4 {
		t.Errorf("retries{reason=status} = %v, want 4", got)
	}
}

// The backend timeout bounds each try (a try past it is retried), the request timeout the whole
// exchange, retries and backoff included (past it the client gets 504 at once).
func TestRetryTimeouts(t *testing.T) {
	t.Run("backend timeout per try", func(t *testing.T) {
		be := newCountingBackend(t, "be", false, func(n int64, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
				return
			}
			_, _ = io.WriteString(w, "ok")
		})
		c, count := retrySetup(t, &irv1.Retry{Codes: []uint32{504}, Attempts: 1},
			&irv1.Timeouts{BackendRequestMs: 200, RequestMs: 3000}, irv1.Cluster_HTTP1, be.testBackend)
		start := time.Now()
		r := must(t, c.get("http://x/"))
		if r.status != http.StatusOK || be.seen.Load() != 2 {
			t.Fatalf("%d after %d tries, want 200 after 2", r.status, be.seen.Load())
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
			t.Errorf("took %v, want the first try's 200ms and a quick second", d)
		}
		if got := count("backend_timeout"); got != 1 {
			t.Errorf("retries{reason=backend_timeout} = %v, want 1", got)
		}
	})
	t.Run("request timeout bounds the retries", func(t *testing.T) {
		be := newCountingBackend(t, "be", false, func(_ int64, w http.ResponseWriter, _ *http.Request) {
			time.Sleep(100 * time.Millisecond)
			http.Error(w, "failing", http.StatusInternalServerError)
		})
		c, _ := retrySetup(t, &irv1.Retry{Codes: []uint32{500}, Attempts: 50},
			&irv1.Timeouts{RequestMs: 350}, irv1.Cluster_HTTP1, be.testBackend)
		start := time.Now()
		r := must(t, c.get("http://x/"))
		d := time.Since(start)
		if r.status != http.StatusGatewayTimeout {
			t.Fatalf("%d, want 504 when the request timeout ends the retries", r.status)
		}
		if d < 350*time.Millisecond || d > 1500*time.Millisecond {
			t.Errorf("answered after %v, want at the 350ms request timeout", d)
		}
		if n := be.seen.Load(); n < 2 || n > 4 {
			t.Errorf("backend saw %d tries in 350ms of 100ms tries, want 2 to 4", n)
		}
	})
}

// A connection lost before any answer is retried for an idempotent request only: a POST may
// have been processed, so it is answered 502 and not sent again.
func TestRetryResetIdempotentOnly(t *testing.T) {
	var hangups atomic.Int64
	dropper, _ := rawBackend(t, func(int64, *http.Request) (string, bool) {
		hangups.Add(1)
		return "", true // read the request, close without a byte
	})
	good := newCountingBackend(t, "good", false, nil)
	c, count := retrySetup(t, &irv1.Retry{Attempts: 1}, nil, irv1.Cluster_HTTP1, dropper, good.testBackend)
	for i := range 4 {
		if r := must(t, c.get("http://x/")); r.status != http.StatusOK {
			t.Fatalf("GET %d: %d, want 200 from the retry", i, r.status)
		}
	}
	if hangups.Load() == 0 {
		t.Fatal("no GET reached the endpoint that hangs up: nothing was retried")
	}
	if got := count("reset"); got != float64(hangups.Load()) {
		t.Errorf("retries{reason=reset} = %v, want %d", got, hangups.Load())
	}
	before, statuses := hangups.Load(), map[int]int{}
	for range 4 {
		req, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("order=1"))
		statuses[must(t, c.do(req)).status]++
	}
	if hangups.Load() == before || statuses[http.StatusBadGateway] != int(hangups.Load()-before) {
		t.Errorf("POSTs: %v with %d hang-ups, want a 502 for each hang-up (no retry)", statuses, hangups.Load()-before)
	}
}

// A cluster without endpoints is answered 503 at once, listed code or not: a retry would find
// none either.
func TestRetryNoEndpoint(t *testing.T) {
	c, count := retrySetup(t, &irv1.Retry{Codes: []uint32{503}, Attempts: 3}, nil, irv1.Cluster_HTTP1)
	r := must(t, c.get("http://x/"))
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "no endpoint available") {
		t.Fatalf("%d %q, want 503 no endpoint available", r.status, r.body)
	}
	if got := count("status"); got != 0 {
		t.Errorf("retries{reason=status} = %v, want 0", got)
	}
}
