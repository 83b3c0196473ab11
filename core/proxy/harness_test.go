package proxy_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

func registry() *core.Registry {
	mods := append(testmod.Modules(), &roundrobin.RoundRobin{}, &listener.HTTP{}, &listener.HTTPS{})
	return core.NewRegistry(mods...)
}

func testLogger() *zap.Logger {
	if os.Getenv("COXSWAIN_TEST_LOG") != "" {
		l, _ := zap.NewDevelopment()
		return l
	}
	return zap.NewNop()
}

func newProxy(t testing.TB) *proxy.Proxy {
	t.Helper()
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: registry()})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func apply(t testing.TB, p *proxy.Proxy, s *irv1.Snapshot) {
	t.Helper()
	if err := p.Apply(context.Background(), s); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// snapshot seals a snapshot of the given listeners, clusters and secrets.
func snapshot(t testing.TB, ls []*irv1.Listener, cs []*irv1.Cluster, secrets ...*irv1.Secret) *irv1.Snapshot {
	t.Helper()
	s := &irv1.Snapshot{Listeners: ls, Clusters: cs, Secrets: secrets}
	if err := irv1.Seal(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func httpListener(port uint32, servers ...*irv1.Server) *irv1.Listener {
	return &irv1.Listener{Name: "127.0.0.1:" + strconv.Itoa(int(port)) + "/HTTP", Address: "127.0.0.1",
		Port: port, Protocol: "HTTP", Servers: servers}
}

func httpsListener(port uint32, servers ...*irv1.Server) *irv1.Listener {
	l := httpListener(port, servers...)
	l.Protocol = "HTTPS"
	l.Name = strings.TrimSuffix(l.Name, "HTTP") + "HTTPS"
	return l
}

func server(host string, vhosts ...*irv1.VirtualHost) *irv1.Server {
	return &irv1.Server{Hostname: host, VirtualHosts: vhosts}
}

func tlsServer(host string, secrets []string, vhosts ...*irv1.VirtualHost) *irv1.Server {
	s := server(host, vhosts...)
	s.Tls = &irv1.TLS{Certificates: secrets}
	return s
}

func vhost(host string, routes ...*irv1.Route) *irv1.VirtualHost {
	return &irv1.VirtualHost{Hostname: host, Routes: routes}
}

// route matches a path prefix with the test matcher and sends to backends.
func route(name, prefix string, backends ...*irv1.Backend) *irv1.Route {
	return &irv1.Route{Name: name, Match: core.MustConfig("route.testpath", map[string]string{"prefix": prefix}),
		Backends: backends}
}

func backend(cluster string, weight uint32, filters ...*irv1.ModuleConfig) *irv1.Backend {
	return &irv1.Backend{Cluster: cluster, Weight: weight, Filters: filters}
}

func cluster(name string, bs ...*testBackend) *irv1.Cluster {
	c := &irv1.Cluster{Name: name}
	for _, b := range bs {
		c.Endpoints = append(c.Endpoints, &irv1.Endpoint{Address: "127.0.0.1", Port: b.port, Weight: 1})
	}
	return c
}

func secret(t testing.TB, name, cn string, dnsNames ...string) *irv1.Secret {
	c, k := testmod.Cert(t, cn, dnsNames...)
	return &irv1.Secret{Name: name, CertificatePem: c, PrivateKeyPem: k}
}

// testBackend is a real HTTP server on loopback that says who it is and what it received.
type testBackend struct {
	name string
	srv  *httptest.Server
	port uint32
}

func newBackend(t testing.TB, name string, h http.HandlerFunc) *testBackend {
	t.Helper()
	if h == nil {
		h = echo(name)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testBackend{name: name, srv: srv, port: portOf(t, srv.Listener.Addr().String())}
}

// newH2CBackend serves cleartext HTTP/2 only (prior knowledge), like a gRPC server.
func newH2CBackend(t testing.TB, name string) *testBackend {
	t.Helper()
	srv := httptest.NewUnstartedServer(echo(name))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return &testBackend{name: name, srv: srv, port: portOf(t, srv.Listener.Addr().String())}
}

func echo(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Backend", name)
		h.Set("X-Got-Host", r.Host)
		h.Set("X-Got-Path", r.URL.Path)
		h.Set("X-Got-Proto", r.Proto)
		h.Set("X-Got-XFF", r.Header.Get("X-Forwarded-For"))
		h.Set("X-Got-XF-Proto", r.Header.Get("X-Forwarded-Proto"))
		h.Set("X-Got-XF-Host", r.Header.Get("X-Forwarded-Host"))
		h.Set("X-Got-Test", r.Header.Get("X-Test"))
		_, _ = io.WriteString(w, name)
	}
}

func portOf(t testing.TB, hostPort string) uint32 {
	t.Helper()
	_, p, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return uint32(n)
}

// closedPort returns a loopback port nothing listens on (just released).
func closedPort(t testing.TB) uint32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := portOf(t, l.Addr().String())
	_ = l.Close()
	return port
}

// addrOf is the bound address of the listener named name.
func addrOf(t testing.TB, p *proxy.Proxy, name string) string {
	t.Helper()
	for _, b := range p.Bound() {
		if b.Name == name {
			return b.Address
		}
	}
	t.Fatalf("listener %s not bound; bound: %v", name, p.Bound())
	return ""
}

// client sends every request to addr whatever the URL's host, so URLs can carry the Host (and, for
// https, the SNI) under test. dials counts new connections.
type client struct {
	*http.Client
	dials *atomic.Int64
}

func newClient(addr string, configure func(*http.Transport)) *client {
	var dials atomic.Int64
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, // the tests check which certificate answered
		MaxIdleConnsPerHost: 8,
		DisableCompression:  true,
	}
	if configure != nil {
		configure(tr)
	}
	return &client{Client: &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, dials: &dials}
}

type result struct {
	status  int
	body    string
	header  http.Header
	proto   int
	peerCN  string
	err     error
	trailer http.Header
}

func (c *client) get(rawURL string, hdr ...string) result {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		return result{err: err}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if strings.EqualFold(hdr[i], "Host") {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return c.do(req)
}

func (c *client) do(req *http.Request) result {
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := result{status: resp.StatusCode, body: string(b), header: resp.Header, proto: resp.ProtoMajor,
		err: err, trailer: resp.Trailer}
	if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
		r.peerCN = resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	return r
}

func must(t testing.TB, r result) result {
	t.Helper()
	if r.err != nil {
		t.Fatalf("request failed: %v", r.err)
	}
	return r
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func hostURL(scheme, host, path string) string {
	return (&url.URL{Scheme: scheme, Host: host, Path: path}).String()
}
