package proxy_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
)

// outcomeBackend answers by path, the way an endpoint can end an exchange. A request with
// X-Check answers 200.
func outcomeBackend(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Header.Get("X-Check") != "" {
		return
	}
	switch r.URL.Path {
	case "/notfound":
		w.WriteHeader(http.StatusNotFound)
	case "/fail":
		w.WriteHeader(http.StatusInternalServerError)
	case "/reset": // the connection (HTTP/1) or stream (h2c) dropped before any answer
		panic(http.ErrAbortHandler)
	case "/broken": // a body that stops short: the connection or stream dropped
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write(make([]byte, 10))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	case "/slow": // a streamed body that stalls until the proxy goes away
		_, _ = w.Write(make([]byte, 10))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// Every way an exchange ends, on every path, counts against the endpoint's breaker or not as
// the outcome says: 5xx, refused, reset and a body broken off do; a 404, a client that went away
// and a request body a filter refused do not. Each case has a cluster whose breaker opens on one
// failure; the request after it tells whether it did.
func TestBreakerCountsOutcomes(t *testing.T) {
	cases := []struct {
		name    string
		counted bool
	}{
		{"ok", false},
		{"notfound", false},
		{"fail", true},
		{"refused", true},
		{"reset", true},
		{"broken", true},
		{"slow", false}, // the client goes away mid-body
		{"limit", false},
	}
	for _, path := range requestPaths {
		t.Run(path.name, func(t *testing.T) {
			var be *testBackend
			if path.proto == irv1.Cluster_H2C {
				be, _ = newH2CBackendFunc(t, "be", outcomeBackend, new(atomic.Int64))
			} else {
				be = newBackend(t, "be", outcomeBackend)
			}
			var routes []*irv1.Route
			var clusters []*irv1.Cluster
			for _, tc := range cases {
				cl := cluster("c-"+tc.name, be)
				if tc.name == "refused" {
					cl.Endpoints[0].Port = closedPort(t)
				}
				cl.Protocol = path.proto
				cl.Balancer = &irv1.ModuleConfig{Id: "lb.test_feedback"} // its Done says the exchange is over
				cl.CircuitBreaker = &irv1.CircuitBreaker{ThresholdPercent: 100, WindowMs: 60_000, OpenMs: 60_000, MinRequests: 1}
				rt := route("HTTPRoute/ns/"+tc.name+"/rule/0", "/"+tc.name, backend(cl.Name, 1))
				if tc.name == "limit" {
					rt.Filters = []*irv1.ModuleConfig{core.MustConfig("filter.test.body_limit", map[string]int{"limit": 10})}
				}
				routes = append(routes, rt)
				clusters = append(clusters, cl)
			}
			l := httpListener(0, server("", vhost("", routes...)))
			p := newProxy(t)
			apply(t, p, snapshot(t, []*irv1.Listener{l}, clusters))
			c := newClient(addrOf(t, p, l.Name), nil)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					for len(testmod.FeedbackCalls) > 0 {
						<-testmod.FeedbackCalls
					}
					req := path.req("http://x/" + tc.name)
					if tc.name == "limit" && path.name != "h1-stdlib" {
						req, _ = http.NewRequest(http.MethodPost, "http://x/limit", strings.NewReader(strings.Repeat("x", 100)))
					}
					if tc.name == "slow" {
						leaveMidBody(t, c, req)
					} else {
						_ = c.do(req) // failures show as errors or 5xx
					}
					select {
					case <-testmod.FeedbackCalls:
					case <-time.After(10 * time.Second):
						t.Fatal("the exchange never ended")
					}
					check, _ := http.NewRequest(http.MethodGet, "http://x/"+tc.name, nil)
					check.Header.Set("X-Check", "1")
					r := c.do(check)
					open := r.status == http.StatusServiceUnavailable && strings.Contains(r.body, "circuit breaker open")
					if open != tc.counted {
						t.Fatalf("after %s: next request %d %q (%v); counted against the endpoint %v, want %v",
							tc.name, r.status, r.body, r.err, open, tc.counted)
					}
				})
			}
		})
	}
}

// leaveMidBody sends req, reads the response header and part of the body, then goes away.
func leaveMidBody(t *testing.T, c *client, req *http.Request) {
	t.Helper()
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	resp, err := c.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
		t.Fatalf("reading the start of the body: %v", err)
	}
	cancel()
	_ = resp.Body.Close()
}
