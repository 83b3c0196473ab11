// Package lbtest runs balancer modules through the real proxy engine, for the lb.* packages'
// tests: a real HTTP listener on loopback, one catch-all route to one cluster whose balancer is
// the given ModuleConfig (loaded as a snapshot from the controller would be) and whose endpoints
// are real loopback backends. Each backend tells which it is in a response header, so a test
// counts where its requests went.
//
// It also has the helpers the unit tests of every balancer share (Load, Endpoints).
package lbtest

import (
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
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

// BackendHeader is the response header in which a backend answers its index.
const BackendHeader = "X-Lbtest-Backend"

// ClusterName is the harness cluster's name.
const ClusterName = "lbtest/backend:80"

// Load loads the balancer mc names from a registry of mod alone, as the engine would (strict
// decode, Provision), and closes its build context when t ends.
func Load(t testing.TB, mod core.Module, mc *irv1.ModuleConfig) core.Balancer {
	t.Helper()
	bc := core.NewBuildContext(context.Background(), nil, core.NewRegistry(mod), &irv1.Snapshot{})
	t.Cleanup(func() { _ = bc.Close() })
	b, err := core.Load[core.Balancer](bc, mc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Endpoints returns n endpoints of weight 1 on distinct addresses 10.0.x.y:8080.
func Endpoints(n int) []*core.Endpoint {
	eps := make([]*core.Endpoint, n)
	for i := range eps {
		eps[i] = core.NewEndpoint(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), 8080, 1)
	}
	return eps
}

// Harness is a running proxy in front of real backends.
type Harness struct {
	// URL is the proxy listener's "http://127.0.0.1:port".
	URL    string
	Proxy  *proxy.Proxy
	Client *http.Client

	snap *irv1.Snapshot
	all  []*irv1.Endpoint // every backend's endpoint, by index
	logs *observer.ObservedLogs
}

// Options tune a harness; the zero value is what Start uses.
type Options struct {
	// RequestTimeout is the route's request timeout; 0 is none.
	RequestTimeout time.Duration
	// SessionPersistence is the cluster's session persistence; nil is none.
	SessionPersistence *irv1.SessionPersistence
}

// Start serves one backend per handler (nil answers 200 "ok") behind a proxy whose only
// cluster is balanced by balancer. mod is the balancer's module; listener.http and route.http
// are added. Everything is closed when t ends.
func Start(t testing.TB, mod core.Module, balancer *irv1.ModuleConfig, backends ...http.Handler) *Harness {
	t.Helper()
	return Options{}.Start(t, mod, balancer, backends...)
}

// Start is the package's Start with the options o.
func (o Options) Start(t testing.TB, mod core.Module, balancer *irv1.ModuleConfig, backends ...http.Handler) *Harness {
	t.Helper()
	cl := &irv1.Cluster{Name: ClusterName, Balancer: balancer, SessionPersistence: o.SessionPersistence}
	for i, hd := range backends {
		srv := httptest.NewServer(tag(i, hd))
		t.Cleanup(srv.Close)
		port := srv.Listener.Addr().(*net.TCPAddr).Port
		cl.Endpoints = append(cl.Endpoints, &irv1.Endpoint{Address: "127.0.0.1", Port: uint32(port), Weight: 1})
	}
	reg := core.NewRegistry((*listener.HTTP)(nil), (*httproute.Matcher)(nil), mod)
	logCore, logs := observer.New(zap.InfoLevel)
	p := proxy.New(proxy.Options{Registry: reg, Log: zap.New(logCore)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("lbtest: closing the proxy: %v", err)
		}
	})
	match := httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/"}}
	snap := &irv1.Snapshot{
		Listeners: []*irv1.Listener{{
			Name: "127.0.0.1:0/HTTP", Address: "127.0.0.1", Port: 0, Protocol: "HTTP",
			Servers: []*irv1.Server{{VirtualHosts: []*irv1.VirtualHost{{Routes: []*irv1.Route{{
				Name:     "lbtest/route",
				Match:    core.MustConfig(httproute.ModuleID, match),
				Backends: []*irv1.Backend{{Cluster: ClusterName, Weight: 1}},
				Timeouts: &irv1.Timeouts{RequestMs: uint32(o.RequestTimeout.Milliseconds())},
			}}}}}},
		}},
		Clusters: []*irv1.Cluster{cl},
	}
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(context.Background(), snap); err != nil {
		t.Fatalf("lbtest: applying the snapshot: %v", err)
	}
	bound := p.Bound()
	if len(bound) != 1 {
		t.Fatalf("lbtest: want one listener bound, got %v (failed: %v)", bound, p.Failed())
	}
	h := &Harness{URL: "http://" + bound[0].Address, Proxy: p, Client: &http.Client{
		Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}, snap: snap, all: cl.Endpoints, logs: logs}
	t.Cleanup(h.Client.CloseIdleConnections)
	return h
}

// Keep applies a snapshot that differs only in the cluster's endpoints: those of the backends
// listed (by index). The engine must update the cluster in place (the same balancer instance gets
// SetEndpoints), as it does when pods come and go; t fails if it rebuilt the table instead.
func (h *Harness) Keep(t testing.TB, backends ...int) {
	t.Helper()
	h.logs.TakeAll()
	snap := proto.Clone(h.snap).(*irv1.Snapshot)
	cl := snap.Clusters[0]
	cl.Endpoints = nil
	for _, i := range backends {
		cl.Endpoints = append(cl.Endpoints, proto.Clone(h.all[i]).(*irv1.Endpoint))
	}
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	if err := h.Proxy.Apply(context.Background(), snap); err != nil {
		t.Fatalf("lbtest: applying the endpoint update: %v", err)
	}
	applied := h.logs.FilterMessage("snapshot applied").FilterField(zap.Bool("endpointsOnly", true))
	if applied.Len() != 1 {
		t.Fatalf("lbtest: the endpoint update was not applied in place: %v", h.logs.All())
	}
}

// Rebuild applies a snapshot that changes more than endpoints (the route's name), so the engine
// builds a new table with a new balancer instance; t fails if it took the in-place path.
func (h *Harness) Rebuild(t testing.TB) {
	t.Helper()
	h.logs.TakeAll()
	snap := proto.Clone(h.snap).(*irv1.Snapshot)
	rt := snap.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
	rt.Name += "/rebuilt"
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	if err := h.Proxy.Apply(context.Background(), snap); err != nil {
		t.Fatalf("lbtest: applying the rebuild: %v", err)
	}
	h.snap = snap
	if n := h.logs.FilterMessage("snapshot applied").FilterField(zap.Bool("endpointsOnly", true)).Len(); n != 0 {
		t.Fatal("lbtest: the snapshot was applied in place, not rebuilt")
	}
}

func tag(i int, next http.Handler) http.Handler {
	id := strconv.Itoa(i)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(BackendHeader, id)
		if next == nil {
			_, _ = io.WriteString(w, "ok")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Get sends a GET for target with the given header fields and returns the index of the backend
// that answered. It is safe for concurrent use.
func (h *Harness) Get(target string, header http.Header) (int, error) {
	i, _, err := h.GetHeader(target, header)
	return i, err
}

// GetHeader is Get that also returns the response's header (a session cookie the engine set).
func (h *Harness) GetHeader(target string, header http.Header) (int, http.Header, error) {
	req, err := http.NewRequest(http.MethodGet, h.URL+target, nil)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, nil, &StatusError{Status: resp.StatusCode}
	}
	i, err := strconv.Atoi(resp.Header.Get(BackendHeader))
	return i, resp.Header, err
}

// StatusError is Get's error for a response other than 200.
type StatusError struct{ Status int }

func (e *StatusError) Error() string { return "status " + strconv.Itoa(e.Status) }
