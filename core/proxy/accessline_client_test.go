package proxy_test

import (
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/clientip"
)

// TestAccessLogClientIP: the access log's client_ip is the client as the data plane resolved
// it (the PROXY protocol source, the X-Forwarded-For entry a listener trusts, what a route's
// filter.http.client_ip resolved), and peer_ip the socket's peer, which is this test's
// loopback client whatever the headers say.
func TestAccessLogClientIP(t *testing.T) {
	be := newBackend(t, "a", nil)
	sink := newLineSink()
	log := accesslog.New(accesslog.Options{Sink: sink, FlushInterval: time.Millisecond})
	o := newObservedProxy(t, true, log, (*clientip.Filter)(nil))

	// A listener behind a load balancer: PROXY protocol, one trusted X-Forwarded-For hop.
	behindLB := func() *irv1.Listener {
		srv := server("", vhost("", route("r/lb", "/", backend("a", 1))))
		srv.Sources = []string{"ns/gw/http"}
		l := withPP(httpListener(0, srv), true, true)
		l.ClientIpDetection = &irv1.ClientIPDetection{XffNumTrustedHops: 1}
		return l
	}
	// A plain listener whose route resolves the client itself (an Ingress's trust-forwarded-for).
	byFilter := func() *irv1.Listener {
		rt := route("r/filter", "/", backend("a", 1))
		rt.Filters = []*irv1.ModuleConfig{core.MustConfig(clientip.ModuleID, clientip.Config{Hops: 1})}
		srv := server("", vhost("", rt))
		srv.Sources = []string{"ns/gw/http"}
		return httpListener(0, srv)
	}
	for _, tc := range []struct {
		name     string
		listener func() *irv1.Listener
		pp       string // the PROXY header's source; "": none
		xff      string
		client   string
	}{
		{name: "PROXY protocol source", listener: behindLB, pp: "198.51.100.66:1234", client: "198.51.100.66"},
		{name: "trusted X-Forwarded-For hop", listener: behindLB, pp: "198.51.100.66:1234", xff: "192.0.2.9, 203.0.113.1", client: "203.0.113.1"},
		{name: "client_ip filter", listener: byFilter, xff: "192.0.2.9, 203.0.113.2", client: "203.0.113.2"},
		{name: "client_ip filter, no header", listener: byFilter, client: "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.listener()
			apply(t, o.p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("a", be)}))
			var hdr []byte
			if tc.pp != "" {
				hdr = ppHeader(t, 2, tc.pp)
			}
			var extra []string
			if tc.xff != "" {
				extra = []string{"X-Forwarded-For", tc.xff}
			}
			if r := must(t, ppClient(addrOf(t, o.p, l.Name), hdr, false).get("http://example.com/", extra...)); r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			line := o.waitLine(t, sink)
			if line["client_ip"] != tc.client || line["peer_ip"] != "127.0.0.1" {
				t.Errorf("client_ip %v, peer_ip %v; want %s and 127.0.0.1 (line %v)", line["client_ip"], line["peer_ip"], tc.client, line)
			}
			if line["gateway"] != "ns/gw" || line["listener"] != l.Name {
				t.Errorf("gateway %v, listener %v (line %v)", line["gateway"], line["listener"], line)
			}
		})
	}
}
