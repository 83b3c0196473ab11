package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/httproute"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
)

const trustDomain = "test.coxswain"

var fullRegistry = core.Freeze()

// without is the stock registry less some modules: a proxy binary built with fewer modules.
func without(ids ...core.ModuleID) *core.Registry {
	drop := map[core.ModuleID]bool{}
	for _, id := range ids {
		drop[id] = true
	}
	var mods []core.Module
	for _, id := range fullRegistry.IDs() {
		if !drop[id] {
			info, _ := fullRegistry.Lookup(id)
			mods = append(mods, info.New())
		}
	}
	return core.NewRegistry(mods...)
}

func moduleIDs(reg *core.Registry) []string {
	var out []string
	for _, id := range reg.IDs() {
		out = append(out, string(id))
	}
	return out
}

func logger(t testing.TB) *zap.Logger {
	if os.Getenv("COXSWAIN_TEST_LOG") != "" {
		return zaptest.NewLogger(t)
	}
	return zap.NewNop()
}

// tokens is the test's stand-in for TokenReview: token → "<namespace>/<sa>".
type tokens map[string]string

func (tk tokens) authenticate(_ context.Context, token string) (string, string, error) {
	sub, ok := tk[token]
	if !ok {
		return "", "", fmt.Errorf("%w: unknown token", discovery.ErrUnauthenticated)
	}
	ns, sa, _ := strings.Cut(sub, "/")
	return ns, sa, nil
}

var testTokens = tokens{
	"shared-token": "coxswain-system/coxswain-proxy",
	"gw-a-token":   "apps/coxswain-a",
	"gw-b-token":   "apps/coxswain-b",
	"other-token":  "apps/someone-else",
}

// testServer is a discovery server on loopback with a fresh CA.
type testServer struct {
	*discovery.Server
	ca      *discovery.CA
	caCert  []byte
	caKey   []byte
	addr    string
	bundle  string // trust bundle file
	report  *reporter
	pub     controller.Publisher
	options discovery.Options
}

func startServer(t testing.TB, mutate ...func(*discovery.Options)) *testServer {
	t.Helper()
	certPEM, keyPEM, err := discovery.NewCA(trustDomain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := discovery.LoadCA(trustDomain, certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	opts := discovery.Options{Log: logger(t).Named("discovery"), CA: ca, Authenticate: testTokens.authenticate,
		SharedProxies: []string{"coxswain-system/coxswain-proxy"}, HelloTimeout: 5 * time.Second}
	for _, m := range mutate {
		m(&opts)
	}
	srv, err := discovery.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	bundle := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(bundle, ca.Bundle(), 0o600); err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: srv, ca: ca, caCert: certPEM, caKey: keyPEM, addr: ln.Addr().String(), bundle: bundle,
		report: newReporter(), options: opts}
}

// lead starts a leadership term; it ends with the test or with stepDown.
func (s *testServer) lead(t testing.TB) {
	t.Helper()
	pub, err := s.NewPublisher(context.Background(), s.report)
	if err != nil {
		t.Fatal(err)
	}
	s.pub = pub
	t.Cleanup(func() { _ = pub.Close(context.Background()) })
}

func (s *testServer) stepDown(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *testServer) publish(t testing.TB, snap *irv1.Snapshot) {
	t.Helper()
	if err := s.pub.Publish(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
}

// reporter records what the publisher reports, as the status writer would.
type reporter struct {
	mu      sync.Mutex
	applied map[string]int64
	pending map[string][]string // every message, in order
	unbound map[string][]controller.ListenerFailure
	gaps    []controller.RouteModuleGap
	changed chan struct{} // signalled on every Applied
}

func newReporter() *reporter {
	return &reporter{applied: map[string]int64{}, pending: map[string][]string{}, unbound: map[string][]controller.ListenerFailure{},
		changed: make(chan struct{}, 1)}
}

var _ controller.Reporter = (*reporter)(nil)

func (r *reporter) Applied(gws []*irv1.GatewayGeneration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range gws {
		k := g.GetNamespace() + "/" + g.GetName()
		r.applied[k] = max(r.applied[k], g.GetGeneration())
	}
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *reporter) Pending(g *irv1.GatewayGeneration, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := g.GetNamespace() + "/" + g.GetName()
	r.pending[k] = append(r.pending[k], fmt.Sprintf("%d: %s", g.GetGeneration(), what))
}

func (r *reporter) Unbound(g *irv1.GatewayGeneration, fs []controller.ListenerFailure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unbound[g.GetNamespace()+"/"+g.GetName()] = fs
}

func (r *reporter) ModulesMissing(gaps []controller.RouteModuleGap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gaps = gaps
}

func (r *reporter) modulesMissing() []controller.RouteModuleGap {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gaps
}

func (r *reporter) unboundOf(gw string) []controller.ListenerFailure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unbound[gw]
}

func (r *reporter) appliedGen(gw string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied[gw]
}

func (r *reporter) lastPending(gw string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pending[gw]
	if len(p) == 0 {
		return ""
	}
	return p[len(p)-1]
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *testServer) waitApplied(t testing.TB, gw string, gen int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s generation %d applied", gw, gen), func() error {
		if got := s.report.appliedGen(gw); got < gen {
			return fmt.Errorf("applied generation %d; pending: %s", got, s.report.lastPending(gw))
		}
		return nil
	})
}

// testProxy is a real proxy engine driven by a discovery agent.
type testProxy struct {
	*proxy.Proxy
	agent *agent.Agent
	rec   *recorder
	stop  func()
}

type proxyOpts struct {
	node, token, gateway string
	registry             *core.Registry
	addrs                []string
	engine               agent.Engine // a real proxy when nil
	fullSnapshots        bool         // the agent announces no deltas, as an older proxy
	preload              *irv1.Snapshot
	listenAddress        string
}

// recorder is a real proxy that remembers the snapshot it last applied, as the agent gave it.
type recorder struct {
	*proxy.Proxy
	mu   sync.Mutex
	last *irv1.Snapshot
}

func (r *recorder) Apply(ctx context.Context, snap *irv1.Snapshot) error {
	if err := r.Proxy.Apply(ctx, snap); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last = snap
	return nil
}

func (r *recorder) applied() *irv1.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

func startProxy(t testing.TB, s *testServer, o proxyOpts) *testProxy {
	t.Helper()
	if o.registry == nil {
		o.registry = fullRegistry
	}
	if o.addrs == nil {
		o.addrs = []string{s.addr}
	}
	px := proxy.New(proxy.Options{Log: logger(t).Named(o.node), Registry: o.registry,
		BindRetryMin: 20 * time.Millisecond, BindRetryMax: 200 * time.Millisecond})
	if o.preload != nil { // a proxy that already serves a snapshot when its agent starts
		if err := px.Apply(context.Background(), o.preload); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{Proxy: px}
	var engine agent.Engine = rec
	if o.engine != nil {
		engine = o.engine
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(o.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(agent.Options{Log: logger(t).Named(o.node + ".agent"), Engine: engine, Modules: moduleIDs(o.registry),
		Addresses: o.addrs, TokenFile: tokenFile, TrustBundleFile: s.bundle, Node: o.node, Gateway: o.gateway,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, FullSnapshots: o.fullSnapshots, ListenAddress: o.listenAddress})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = ag.Run(ctx)
	}()
	tp := &testProxy{Proxy: px, agent: ag, rec: rec}
	var once sync.Once
	tp.stop = func() {
		once.Do(func() {
			cancel()
			<-done
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer ccancel()
			_ = px.Close(cctx)
		})
	}
	t.Cleanup(tp.stop)
	return tp
}

// addr is the bound address of the proxy's listener named name.
func (p *testProxy) addr(name string) string {
	for _, b := range p.Bound() {
		if b.Name == name {
			return b.Address
		}
	}
	return ""
}

// get sends GET path to the proxy's listener name and returns status and body.
func (p *testProxy) get(name, path string) (int, string, error) {
	a := p.addr(name)
	if a == "" {
		return 0, "", fmt.Errorf("listener %s not bound", name)
	}
	res, err := httpClient.Get("http://" + a + path)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}

var httpClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// waitServes waits until GET path on the proxy answers status with a body containing body.
func (p *testProxy) waitServes(t testing.TB, name, path string, status int, body string) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s%s answers %d %q", name, path, status, body), func() error {
		code, b, err := p.get(name, path)
		if err != nil {
			return err
		}
		if code != status || !strings.Contains(b, body) {
			return fmt.Errorf("got %d %q", code, b)
		}
		return nil
	})
}

// backendServer answers every request with its name and the request's X-Test header.
func backendServer(t testing.TB, name string) (string, uint32) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", name, r.URL.Path, r.Header.Get("X-Test"))
	}))
	t.Cleanup(srv.Close)
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return host, uint32(p)
}

// gw describes one Gateway of a test snapshot: one HTTP listener at address:port (port 0 binds
// any free port), routes by path prefix to clusters.
type gw struct {
	ns, name string
	gen      int64
	address  string
	port     uint32
	routes   []route
	secret   string // a TLS Secret name the Gateway's server references (not served: bookkeeping only)
}

type route struct {
	prefix  string
	cluster string
	filters []*irv1.ModuleConfig
}

type cluster struct {
	name string
	host string
	port uint32
}

func listenerName(address string, port uint32) string {
	return net.JoinHostPort(address, strconv.Itoa(int(port))) + "/HTTP"
}

// snapshot builds and seals a snapshot.
func snapshot(t testing.TB, gws []gw, clusters ...cluster) *irv1.Snapshot {
	t.Helper()
	snap := &irv1.Snapshot{}
	for _, g := range gws {
		vh := &irv1.VirtualHost{}
		for i, r := range g.routes {
			m, _ := json.Marshal(httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: r.prefix}})
			vh.Routes = append(vh.Routes, &irv1.Route{
				Name:     fmt.Sprintf("HTTPRoute/%s/%s/rule/%d/match/0", g.ns, g.name, i),
				Match:    &irv1.ModuleConfig{Id: httproute.ModuleID, Json: m},
				Filters:  r.filters,
				Backends: []*irv1.Backend{{Cluster: r.cluster, Weight: 1}},
			})
		}
		sv := &irv1.Server{Sources: []string{g.ns + "/" + g.name + "/http"}, VirtualHosts: []*irv1.VirtualHost{vh}}
		if g.secret != "" {
			sv.Tls = &irv1.TLS{Certificates: []string{g.secret}}
			snap.Secrets = append(snap.Secrets, &irv1.Secret{Name: g.secret, CertificatePem: []byte("cert of " + g.name), PrivateKeyPem: []byte("key of " + g.name)})
		}
		snap.Listeners = append(snap.Listeners, &irv1.Listener{Name: listenerName(g.address, g.port), Address: g.address,
			Port: g.port, Protocol: "HTTP", Servers: []*irv1.Server{sv}})
		snap.Gateways = append(snap.Gateways, &irv1.GatewayGeneration{Namespace: g.ns, Name: g.name, Generation: g.gen})
	}
	for _, c := range clusters {
		snap.Clusters = append(snap.Clusters, &irv1.Cluster{Name: c.name, Endpoints: []*irv1.Endpoint{{Address: c.host, Port: c.port}}})
	}
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

func headerFilter(name, value string) *irv1.ModuleConfig {
	b, _ := json.Marshal(headers.Config{Set: []headers.Header{{Name: name, Value: value}}})
	return &irv1.ModuleConfig{Id: headers.RequestModuleID, Json: b}
}
