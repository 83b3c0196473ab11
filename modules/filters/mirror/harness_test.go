package mirror_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
	"github.com/coxswain-labs/coxswain/modules/filters/mirror"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

// seen is one request a backend received.
type seen struct {
	Method, URI, Host string
	Header            http.Header
	Body              []byte
}

// backend is a real loopback HTTP server that records what it receives; handle, when set, runs
// after recording (a slow mirror blocks there).
type backend struct {
	srv    *httptest.Server
	got    chan seen
	port   uint32
	handle func(w http.ResponseWriter, r *http.Request)
}

func newBackend(t testing.TB, name string, handle func(http.ResponseWriter, *http.Request)) *backend {
	return startBackend(t, name, handle, false)
}

// newH2CBackend is newBackend speaking cleartext HTTP/2 only (with prior knowledge), as a gRPC
// server does; the Proto it saw is in the recorded header as X-Seen-Proto.
func newH2CBackend(t testing.TB, name string) *backend { return startBackend(t, name, nil, true) }

func startBackend(t testing.TB, name string, handle func(http.ResponseWriter, *http.Request), h2c bool) *backend {
	return serveBackend(t, name, handle, func(srv *httptest.Server) {
		if h2c {
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			srv.Config.Protocols = &p
		}
		srv.Start()
	})
}

// serveBackend is a recording backend that start configures and starts.
func serveBackend(t testing.TB, name string, handle func(http.ResponseWriter, *http.Request), start func(*httptest.Server)) *backend {
	b := &backend{got: make(chan seen, 4096), handle: handle}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hdr := r.Header.Clone()
		hdr.Set("X-Seen-Proto", r.Proto)
		if r.TLS != nil {
			hdr.Set("X-Seen-SNI", r.TLS.ServerName)
			if len(r.TLS.PeerCertificates) > 0 {
				hdr.Set("X-Seen-Client", r.TLS.PeerCertificates[0].Subject.CommonName)
			}
		}
		select {
		case b.got <- seen{r.Method, r.RequestURI, r.Host, hdr, body}:
		default:
		}
		if b.handle != nil {
			b.handle(w, r)
			return
		}
		_, _ = io.WriteString(w, name)
	}))
	start(b.srv)
	t.Cleanup(b.srv.Close)
	_, port, _ := net.SplitHostPort(b.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	b.port = uint32(n)
	return b
}

// next waits for the next request the backend receives.
func (b *backend) next(t testing.TB) seen {
	t.Helper()
	select {
	case s := <-b.got:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("the backend received nothing in 10s")
		return seen{}
	}
}

// none checks the backend has received nothing more (after the caller awaited whatever would
// have arrived first).
func (b *backend) none(t testing.TB) {
	t.Helper()
	select {
	case s := <-b.got:
		t.Errorf("unexpected request %s %s", s.Method, s.URI)
	default:
	}
}

// harness is the real engine with one route to primary whose filters mirror to mirrors.
type harness struct {
	url     string
	client  *http.Client
	reg     *prometheus.Registry
	primary *backend
	mirrors []*backend
}

type options struct {
	fraction *mirror.Fraction
	settings map[string]string
	log      *zap.Logger
	// before are filters in front of the mirrors.
	before []*irv1.ModuleConfig
	// h2c makes the mirror clusters cleartext HTTP/2 (a GRPCRoute's).
	h2c bool
	// tls is the mirror clusters' upstream TLS, secrets the snapshot's (its client certificate).
	tls     *irv1.UpstreamTLS
	secrets []*irv1.Secret
	// accessLog is the proxy's access log; nil: none.
	accessLog *accesslog.Logger
}

func mirrorCluster(i int) string { return "ns/mirror-" + strconv.Itoa(i) + ":80" }

func start(t testing.TB, primary *backend, mirrors []*backend, o options) *harness {
	t.Helper()
	filters := append([]*irv1.ModuleConfig(nil), o.before...)
	for i := range mirrors {
		filters = append(filters, core.MustConfig(mirror.ModuleID, mirror.Config{
			Cluster: mirrorCluster(i), Route: "HTTPRoute/ns/r", Fraction: o.fraction}))
	}
	snap, err := filtertest.Snapshot(filters, filtertest.Options{}, primary.port)
	if err != nil {
		t.Fatal(err)
	}
	// The Gateway listener the server comes from: the access log lines name its Gateway.
	snap.Listeners[0].Servers[0].Sources = []string{"ns/gw/http"}
	// A route without mirrors in front, for comparisons in the same run (load_test.go).
	vh := snap.Listeners[0].Servers[0].VirtualHosts[0]
	plain := &irv1.Route{Name: "filtertest/plain/rule/0/match/0",
		Match:    core.MustConfig(httproute.ModuleID, httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/plain"}}),
		Backends: vh.Routes[0].Backends}
	vh.Routes = append([]*irv1.Route{plain}, vh.Routes...)
	for i, m := range mirrors {
		c := &irv1.Cluster{Name: mirrorCluster(i), Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: m.port, Weight: 1}}}
		if o.h2c {
			c.Protocol = irv1.Cluster_H2C
		}
		c.Tls = o.tls
		snap.Clusters = append(snap.Clusters, c)
	}
	snap.Secrets = append(snap.Secrets, o.secrets...)
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p := proxy.New(proxy.Options{Log: o.log, Registry: core.Freeze(), Metrics: reg, ModuleSettings: o.settings, AccessLog: o.accessLog})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	if err := p.Apply(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &harness{url: "http://" + p.Bound()[0].Address, client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		reg: reg, primary: primary, mirrors: mirrors}
}

// do sends one request and returns the status and body the client got.
func (h *harness) do(t testing.TB, method, target string, body io.Reader, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, h.url+target, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// count is coxswain_proxy_mirror_requests_total for mirror i and result.
func (h *harness) count(t testing.TB, i int, result string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "coxswain_proxy_mirror_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["upstream"] == mirrorCluster(i) && l["result"] == result && l["route"] == "HTTPRoute/ns/r" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// await waits until the count of mirror i and result is want.
func (h *harness) await(t testing.TB, i int, result string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.count(t, i, result) < want {
		if time.Now().After(deadline) {
			t.Fatalf("mirror %d %s = %v, want %v", i, result, h.count(t, i, result), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := h.count(t, i, result); got != want {
		t.Fatalf("mirror %d %s = %v, want %v", i, result, got, want)
	}
}

// settle waits until every copy mirror i was given has arrived at m (the count of sent stops
// moving and equals what m received) and returns that count. Sampling decides how many there
// are, so there is no number to await.
func (h *harness) settle(t testing.TB, i int, m *backend) float64 {
	t.Helper()
	arrived := 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		before := h.count(t, i, mirror.ResultSent)
		time.Sleep(100 * time.Millisecond)
		for len(m.got) > 0 {
			<-m.got
			arrived++
		}
		if now := h.count(t, i, mirror.ResultSent); now == before && now == float64(arrived) {
			return now
		}
	}
	t.Fatalf("mirror %d did not settle: sent %v, arrived %d", i, h.count(t, i, mirror.ResultSent), arrived)
	return 0
}
