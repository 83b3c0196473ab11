package proxy_test

import (
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// TestListenerStatsCollector scrapes the listener counters of an HTTPS listener after one
// request over TLS and one client that fails its handshake (it does not trust the certificate):
// one handshake error, one accepted HTTP connection.
func TestListenerStatsCollector(t *testing.T) {
	be := newBackend(t, "ok", nil)
	secrets := []*irv1.Secret{secret(t, "ns/cert", "example.com", "example.com")}
	ln := httpsListener(0, tlsServer("example.com", []string{"ns/cert"}, vhost("example.com", route("r", "/", backend("ok", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{ln}, []*irv1.Cluster{cluster("ok", be)}, secrets...))
	addr := addrOf(t, p, ln.Name)

	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, ServerName: "example.com"}}} //nolint:gosec // the test's own certificate
	resp, err := c.Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if tls.Client(raw, &tls.Config{ServerName: "example.com"}).Handshake() == nil { //nolint:gosec // verification must fail
		t.Fatal("handshake with an untrusted certificate succeeded")
	}
	_ = raw.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(p.StatsCollector())
	eventually(t, "the failed handshake counted", func() bool {
		n, err := testutil.GatherAndCount(reg, "coxswain_proxy_listener_tls_handshake_errors_total")
		return err == nil && n == 1 && strings.Contains(gatherText(t, reg), "coxswain_proxy_listener_tls_handshake_errors_total{listener=\""+ln.Name+"\"} 1")
	})
	if got := gatherText(t, reg); !strings.Contains(got, "coxswain_proxy_listener_http_connections_accepted_total{listener=\""+ln.Name+"\"} 1") {
		t.Errorf("accepted connections not 1:\n%s", got)
	}
}

func gatherText(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b.WriteString(mf.GetName() + "{")
			for _, lp := range m.GetLabel() {
				b.WriteString(lp.GetName() + "=\"" + lp.GetValue() + "\"")
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			b.WriteString("} " + strconv.FormatFloat(v, 'f', -1, 64) + "\n")
		}
	}
	return b.String()
}
