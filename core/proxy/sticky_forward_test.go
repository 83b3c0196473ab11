package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// TestStickyCookieSurvivesForwarders: the Set-Cookie the engine puts in the response header before
// forwarding reaches the client whichever forwarder serves the request (the HTTP/1.1 fast path,
// the stdlib reverse proxy, the h2c client), next to the backend's own cookies, and on the
// engine's own error answers; and an interim (1xx) response the backend sends first neither
// carries it nor loses it.
func TestStickyCookieSurvivesForwarders(t *testing.T) {
	readBody := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body) // the Go server sends 100 Continue on the first read
			echo(name)(w, r)
		}
	}
	earlyHints := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			readBody(name)(w, r)
		}
	}
	cases := []struct {
		name string
		// backend makes the cluster's one endpoint; nil is a closed port (the engine answers 502).
		backend func(t *testing.T) *testBackend
		route   func(*irv1.Route)
		tls     bool // HTTPS listener, HTTP/2 client
		req     func(*http.Request)
		status  int
		// also are Set-Cookie fields the backend sets itself.
		also []string
		// interim is a 1xx status the client must see (HTTP/1.1). No 1xx carries the cookie.
		interim int
	}{
		{name: "h1 fast path"},
		{name: "h1 fast path, the backend sets cookies too", also: []string{"app=1", "theme=dark"},
			backend: func(t *testing.T) *testBackend {
				return newBackend(t, "be", func(w http.ResponseWriter, r *http.Request) {
					w.Header()["Set-Cookie"] = []string{"app=1", "theme=dark"}
					echo("be")(w, r)
				})
			}},
		{name: "h1 fast path, response filter", route: func(rt *irv1.Route) {
			rt.Backends[0].Filters = []*irv1.ModuleConfig{
				core.MustConfig("filter.test.set_response_header", map[string]string{"name": "X-F", "value": "1"})}
		}},
		{name: "h1 fast path, HTTP/2 client", tls: true},
		{name: "stdlib path, 100 Continue", backend: func(t *testing.T) *testBackend { return newBackend(t, "be", readBody("be")) },
			req: expectContinue},
		{name: "stdlib path, 103 Early Hints", backend: func(t *testing.T) *testBackend { return newBackend(t, "be", earlyHints("be")) },
			req: expectContinue, interim: http.StatusEarlyHints},
		{name: "stdlib path, 103 Early Hints, HTTP/2 client", tls: true,
			backend: func(t *testing.T) *testBackend { return newBackend(t, "be", earlyHints("be")) },
			req:     expectContinue, interim: http.StatusEarlyHints},
		{name: "h2c", backend: func(t *testing.T) *testBackend { return newH2CBackend(t, "be") }},
		{name: "engine error (fast path)", status: http.StatusBadGateway},
		{name: "engine error (stdlib path)", req: expectContinue, status: http.StatusBadGateway},
		{name: "engine error, the route's error writer", status: http.StatusBadGateway, route: func(rt *irv1.Route) {
			rt.Match = core.MustConfig("route.testerrors", map[string]string{"prefix": "/"})
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status := tc.status
			if status == 0 {
				status = http.StatusOK
			}
			cl := &irv1.Cluster{Name: "be"}
			var port uint32
			switch {
			case status == http.StatusBadGateway:
				port = closedPort(t)
				cl.Endpoints = []*irv1.Endpoint{{Address: "127.0.0.1", Port: port, Weight: 1}}
			case tc.backend == nil:
				be := newBackend(t, "be", nil)
				port, cl = be.port, cluster("be", be)
			default:
				be := tc.backend(t)
				port, cl = be.port, cluster("be", be)
				if strings.HasPrefix(tc.name, "h2c") {
					cl.Protocol = irv1.Cluster_H2C
				}
			}
			sticky(cl, irv1.SessionPersistence_COOKIE, sessCookie)
			rt := route("r", "/", backend("be", 1))
			if tc.route != nil {
				tc.route(rt)
			}
			var l *irv1.Listener
			var secrets []*irv1.Secret
			scheme, configure := "http", func(*http.Transport) {}
			if tc.tls {
				l = httpsListener(0, tlsServer("", []string{"ns/c"}, vhost("", rt)))
				secrets = append(secrets, secret(t, "ns/c", "c", "example.com"))
				scheme, configure = "https", func(tr *http.Transport) { tr.ForceAttemptHTTP2 = true }
			} else {
				l = httpListener(0, server("", vhost("", rt)))
			}
			p := newProxy(t)
			apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl}, secrets...))
			c := newClient(addrOf(t, p, l.Name), configure)

			req, err := http.NewRequest(http.MethodGet, hostURL(scheme, "example.com", "/"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.req != nil {
				tc.req(req)
			}
			var mu sync.Mutex
			interim := map[int][]string{}
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					mu.Lock()
					defer mu.Unlock()
					interim[code] = append(interim[code], h.Values("Set-Cookie")...)
					return nil
				},
			}))
			r := must(t, c.do(req))
			if r.status != status {
				t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
			}
			if tc.tls && r.proto != 2 {
				t.Fatalf("HTTP/%d, want HTTP/2", r.proto)
			}
			want := append([]string{wantSetCookie(port)}, tc.also...)
			got := r.header.Values("Set-Cookie")
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("Set-Cookie %q, want %q", got, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if _, ok := interim[tc.interim]; tc.interim != 0 && !tc.tls && !ok {
				t.Errorf("no %d response reached the client (got %v)", tc.interim, interim)
			}
			for code, set := range interim {
				if len(set) > 0 {
					t.Errorf("the %d response carried Set-Cookie %q", code, set)
				}
			}
		})
	}
}

// expectContinue gives r a body and "Expect: 100-continue", which the fast path leaves to the
// stdlib reverse proxy (the client sends the body at once: its transport has no continue timeout).
func expectContinue(r *http.Request) {
	r.Method = http.MethodPost
	r.Body = io.NopCloser(strings.NewReader("hello"))
	r.ContentLength = 5
	r.Header.Set("Expect", "100-continue")
}
