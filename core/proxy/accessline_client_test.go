package proxy_test

import (
	"cmp"
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
	plain := func() *irv1.Listener {
		srv := server("", vhost("", route("r/plain", "/", backend("a", 1))))
		srv.Sources = []string{"ns/gw/http"}
		return httpListener(0, srv)
	}
	// Each case sends two requests on one connection: the log keeps a connection's client and
	// peer for its later requests only where no request can change them.
	for _, tc := range []struct {
		name      string
		listener  func() *irv1.Listener
		pp        string // the PROXY header's source; "": none
		xff, xff2 string // the two requests' X-Forwarded-For
		client    string
		client2   string // the second request's client; "": client
	}{
		{name: "PROXY protocol source", listener: behindLB, pp: "198.51.100.66:1234", client: "198.51.100.66"},
		{name: "trusted X-Forwarded-For hop", listener: behindLB, pp: "198.51.100.66:1234", xff: "192.0.2.9, 203.0.113.1", client: "203.0.113.1",
			xff2: "192.0.2.9, 203.0.113.5", client2: "203.0.113.5"},
		{name: "client_ip filter", listener: byFilter, xff: "192.0.2.9, 203.0.113.2", client: "203.0.113.2",
			xff2: "203.0.113.6", client2: "203.0.113.6"},
		{name: "client_ip filter, no header", listener: byFilter, client: "127.0.0.1", xff2: "203.0.113.7", client2: "203.0.113.7"},
		{name: "untrusted X-Forwarded-For", listener: plain, xff: "203.0.113.8", client: "127.0.0.1", xff2: "203.0.113.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.listener()
			apply(t, o.p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("a", be)}))
			var hdr []byte
			if tc.pp != "" {
				hdr = ppHeader(t, 2, tc.pp)
			}
			c := ppClient(addrOf(t, o.p, l.Name), hdr, false)
			for i, req := range []struct{ xff, client string }{{tc.xff, tc.client}, {tc.xff2, cmp.Or(tc.client2, tc.client)}} {
				var extra []string
				if req.xff != "" {
					extra = []string{"X-Forwarded-For", req.xff}
				}
				if r := must(t, c.get("http://example.com/", extra...)); r.status != 200 {
					t.Fatalf("request %d: status %d", i+1, r.status)
				}
				line := o.waitLine(t, sink)
				if line["client_ip"] != req.client || line["peer_ip"] != "127.0.0.1" {
					t.Errorf("request %d: client_ip %v, peer_ip %v; want %s and 127.0.0.1 (line %v)", i+1, line["client_ip"], line["peer_ip"], req.client, line)
				}
				if line["gateway"] != "ns/gw" || line["listener"] != l.Name {
					t.Errorf("request %d: gateway %v, listener %v (line %v)", i+1, line["gateway"], line["listener"], line)
				}
			}
			if n := c.dials.Load(); n != 1 {
				t.Errorf("%d connections, want both requests on one", n)
			}
		})
	}
}
