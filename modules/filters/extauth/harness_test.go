package extauth_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/filters/extauth"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/httproute"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

const authCluster = "auth/ext:9000"

// env is a real proxy with one listener whose only route runs the filter under test in front of
// a recording backend; the auth service is cluster authCluster.
type env struct {
	p       *proxy.Proxy
	url     string
	reg     *prometheus.Registry
	backend *recorder
	client  *http.Client
}

// recorder is a backend (or an HTTP auth service) that keeps the requests it received.
type recorder struct {
	mu   sync.Mutex
	seen []*http.Request
	port uint32
	// answer answers a request after it is recorded; nil is 200 "ok".
	answer http.HandlerFunc
}

func startRecorder(t testing.TB, answer http.HandlerFunc) *recorder {
	rec := &recorder{answer: answer}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := r.Clone(context.Background())
		c.Body = io.NopCloser(bytes.NewReader(body))
		c.ContentLength = int64(len(body))
		rec.mu.Lock()
		rec.seen = append(rec.seen, c)
		rec.mu.Unlock()
		if rec.answer != nil {
			rec.answer(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	rec.port = portOf(srv.Listener.Addr())
	return rec
}

// take returns and forgets what was recorded.
func (rec *recorder) take() []*http.Request {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := rec.seen
	rec.seen = nil
	return out
}

func portOf(a net.Addr) uint32 {
	_, p, _ := net.SplitHostPort(a.String())
	n, _ := strconv.Atoi(p)
	return uint32(n)
}

// startEnv runs the proxy. grpcRoute makes the route a route.grpc one to an h2c backend
// (backendPort), else a route.http one to the recording backend.
func startEnv(t testing.TB, cfg extauth.Config, authPorts []uint32, grpcRoute bool, backendPort uint32) *env {
	t.Helper()
	e := &env{reg: prometheus.NewRegistry()}
	reg := core.NewRegistry(&listener.HTTP{}, &roundrobin.RoundRobin{}, (*httproute.Matcher)(nil),
		(*grpcroute.Matcher)(nil), (*extauth.ExternalAuth)(nil))
	e.p = proxy.New(proxy.Options{Log: zap.NewNop(), Registry: reg, Metrics: e.reg})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.p.Close(ctx); err != nil {
			t.Errorf("closing the proxy: %v", err)
		}
	})
	if !grpcRoute {
		e.backend = startRecorder(t, nil)
		backendPort = e.backend.port
	}
	e.apply(t, cfg, authPorts, grpcRoute, backendPort)
	e.url = "http://" + e.p.Bound()[0].Address
	e.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

// apply pushes a snapshot: the route with the filter, the auth cluster with authPorts.
func (e *env) apply(t testing.TB, cfg extauth.Config, authPorts []uint32, grpcRoute bool, backendPort uint32) {
	t.Helper()
	if cfg.Cluster == "" && cfg.Unresolved == "" {
		cfg.Cluster = authCluster
	}
	route := &irv1.Route{Name: "r", Backends: []*irv1.Backend{{Cluster: "backend", Weight: 1}}}
	if cfg.Protocol != "" { // a config without a protocol is a route without the filter
		route.Filters = []*irv1.ModuleConfig{core.MustConfig(extauth.ModuleID, cfg)}
	}
	backend := &irv1.Cluster{Name: "backend", Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: backendPort, Weight: 1}}}
	if grpcRoute {
		route.Match = core.MustConfig(grpcroute.ModuleID, grpcroute.Match{})
		backend.Protocol = irv1.Cluster_H2C
	} else {
		route.Match = core.MustConfig(httproute.ModuleID, httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/"}})
	}
	auth := &irv1.Cluster{Name: authCluster}
	if cfg.Protocol == extauth.ProtocolGRPC {
		auth.Protocol = irv1.Cluster_H2C
	}
	for _, p := range authPorts {
		auth.Endpoints = append(auth.Endpoints, &irv1.Endpoint{Address: "127.0.0.1", Port: p, Weight: 1})
	}
	snap := &irv1.Snapshot{
		Listeners: []*irv1.Listener{{Name: "l", Address: "127.0.0.1", Port: 0, Protocol: "HTTP",
			Servers: []*irv1.Server{{VirtualHosts: []*irv1.VirtualHost{{Routes: []*irv1.Route{route}}}}}}},
		Clusters: []*irv1.Cluster{backend, auth},
	}
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Apply(context.Background(), snap); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// do sends req to the proxy and returns the response with its body read.
func (e *env) do(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func (e *env) get(t testing.TB, target string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+target, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return e.do(t, req)
}

// authServer is a real Envoy Authorization service; decide answers each check.
type authServer struct {
	authv3.UnimplementedAuthorizationServer
	port   uint32
	srv    *grpc.Server
	decide func(*authv3.CheckRequest) *authv3.CheckResponse
	mu     sync.Mutex
	last   *authv3.CheckRequest
	calls  int
}

func startAuthServer(t testing.TB, decide func(*authv3.CheckRequest) *authv3.CheckResponse) *authServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &authServer{port: portOf(ln.Addr()), srv: grpc.NewServer(), decide: decide}
	authv3.RegisterAuthorizationServer(a.srv, a)
	go func() { _ = a.srv.Serve(ln) }()
	t.Cleanup(a.srv.Stop)
	return a
}

func (a *authServer) Check(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	a.mu.Lock()
	a.last, a.calls = req, a.calls+1
	a.mu.Unlock()
	return a.decide(req), nil
}

func (a *authServer) lastCheck() (*authv3.CheckRequest, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, a.calls
}
