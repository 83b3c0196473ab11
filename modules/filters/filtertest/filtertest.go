// Package filtertest runs filter modules against real requests through the real proxy engine,
// for module authors' tests: a real HTTP listener on loopback, one route whose filters are the
// given ModuleConfigs (loaded with core.Load exactly as a snapshot from the controller would be:
// strict JSON decode, Provision, Validate), and a real backend that records what it received.
//
//	h := filtertest.Start(t, []*irv1.ModuleConfig{core.MustConfig(mymod.ModuleID, mymod.Config{...})})
//	ex := h.Get(t, "/some/path?q=1")
//	// ex.Upstream is what the backend saw (nil when the filter answered itself), ex.Status and
//	// ex.Body what the client got.
//
// It lives under modules/, not core/proxy, because it assembles a distribution in miniature: the
// stock route.http matcher and lb.round_robin balancer are modules, and core must not import
// modules. It imports no Kubernetes, so an out-of-tree module's tests can use it cheaply.
package filtertest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/httproute"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

// Options tune Start; the zero value is a catch-all route on any hostname.
type Options struct {
	// Modules are the filter modules the snapshot may load. Nil means every module compiled into
	// the test binary (core.Freeze), which is what a test that imports its module package wants.
	// The listener, route.http and lb.round_robin modules are always added.
	Modules []core.Module
	// Hostname is the route's hostname; "" matches any Host.
	Hostname string
	// Match is the route.http match; nil is PathPrefix "/".
	Match *httproute.Match
	// Backend answers the requests that reach the backend, after they are recorded; nil answers
	// 200 "ok". Response filters are tested through it.
	Backend http.HandlerFunc
	// BackendFilters are the filters of the route's one backendRef (IR Backend.filters), run
	// after the route's filters.
	BackendFilters []*irv1.ModuleConfig
	// Log receives the engine's logs; nil discards them.
	Log *zap.Logger
}

// Request is what the backend received.
type Request struct {
	Method string
	// RequestURI is the request target exactly as it arrived on the wire (escaped path and query).
	RequestURI string
	// Path is the decoded path, RawQuery the query as sent.
	Path, RawQuery string
	Host           string
	Header         http.Header
	Body           []byte
}

// Exchange is one request through the proxy.
type Exchange struct {
	// Status, Header and Body are the response the client got.
	Status int
	Header http.Header
	Body   []byte
	// Upstream is the request the backend received, nil when it received none (a filter or the
	// engine answered).
	Upstream *Request
}

// Harness is a running proxy with one route to one recording backend. Its methods are for
// sequential use: each Exchange pairs a response with the backend request it caused.
type Harness struct {
	// Addr is the proxy listener's "127.0.0.1:port"; URL is "http://" + Addr.
	Addr, URL string
	// Proxy is the engine and BackendPort the recording backend's loopback port, for tests that
	// apply further snapshots (see Snapshot).
	Proxy       *proxy.Proxy
	BackendPort uint32
	// Client sends to the proxy; it does not follow redirects.
	Client *http.Client

	seen chan *Request
}

// Start applies a snapshot whose only route has the given filters, serves it on a loopback port
// and returns the running harness; everything is closed when t ends. A snapshot the engine
// rejects (a missing or invalid module) fails t with the engine's error: use Apply to test that.
func Start(t testing.TB, filters []*irv1.ModuleConfig, opts Options) *Harness {
	t.Helper()
	h, err := start(t, filters, opts)
	if err != nil {
		t.Fatalf("filtertest: %v", err)
	}
	return h
}

// Apply is Start's error path: it returns the engine's error for a snapshot it rejects, and the
// harness when it accepts it.
func Apply(t testing.TB, filters []*irv1.ModuleConfig, opts Options) (*Harness, error) {
	t.Helper()
	return start(t, filters, opts)
}

func start(t testing.TB, filters []*irv1.ModuleConfig, opts Options) (*Harness, error) {
	h := &Harness{seen: make(chan *Request, 64)}
	backend := httptest.NewServer(h.record(opts.Backend))
	t.Cleanup(backend.Close)

	p := proxy.New(proxy.Options{Log: opts.Log, Registry: registry(opts.Modules)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("filtertest: closing the proxy: %v", err)
		}
	})
	h.BackendPort = backendPort(backend)
	snap, err := Snapshot(filters, opts, h.BackendPort)
	if err != nil {
		return nil, err
	}
	if err := p.Apply(context.Background(), snap); err != nil {
		return nil, err
	}
	bound := p.Bound()
	if len(bound) != 1 {
		return nil, fmt.Errorf("want the one harness listener bound, got %v (failed: %v)", bound, p.Failed())
	}
	h.Proxy, h.Addr = p, bound[0].Address
	h.URL = "http://" + h.Addr
	h.Client = &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{},
	}
	t.Cleanup(h.Client.CloseIdleConnections)
	return h, nil
}

// registry is mods plus what every harness snapshot names besides its filters.
func registry(mods []core.Module) *core.Registry {
	if mods == nil {
		return core.Freeze()
	}
	base := []core.Module{(*listener.HTTP)(nil), (*httproute.Matcher)(nil), (*roundrobin.RoundRobin)(nil)}
	return core.NewRegistry(append(base, mods...)...)
}

// record stores every request the backend receives before answering it, so that by the time the
// client has the response the record is in h.seen.
func (h *Harness) record(next http.HandlerFunc) http.HandlerFunc {
	if next == nil {
		next = func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }
	}
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "filtertest backend: reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := &Request{Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path,
			RawQuery: r.URL.RawQuery, Host: r.Host, Header: r.Header.Clone(), Body: body}
		select {
		case h.seen <- rec:
		default: // nobody is reading: a test that sends concurrently without Do
		}
		next(w, r)
	}
}

// Get sends GET target (a path with an optional query, sent as written) to the proxy.
func (h *Harness) Get(t testing.TB, target string) Exchange {
	t.Helper()
	req, err := h.NewRequest(http.MethodGet, target, nil)
	if err != nil {
		t.Fatalf("filtertest: %v", err)
	}
	return h.Do(t, req)
}

// NewRequest is a request for target on the proxy. The target's escaping is kept as written.
func (h *Harness) NewRequest(method, target string, body io.Reader) (*http.Request, error) {
	return http.NewRequest(method, h.URL+target, body)
}

// Do sends req, reads the whole response and returns it with what the backend received.
func (h *Harness) Do(t testing.TB, req *http.Request) Exchange {
	t.Helper()
	h.drain()
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatalf("filtertest: %s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("filtertest: reading the response to %s %s: %v", req.Method, req.URL, err)
	}
	ex := Exchange{Status: resp.StatusCode, Header: resp.Header, Body: body}
	select {
	case ex.Upstream = <-h.seen:
	default:
	}
	return ex
}

// drain forgets requests no Do paired with, so the next Exchange gets its own.
func (h *Harness) drain() {
	for {
		select {
		case <-h.seen:
		default:
			return
		}
	}
}

func backendPort(s *httptest.Server) uint32 {
	_, port, _ := net.SplitHostPort(s.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return uint32(n)
}
