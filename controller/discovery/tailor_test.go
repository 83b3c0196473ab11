package discovery

import (
	"encoding/json"
	"strings"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

func mc(id string) *irv1.ModuleConfig { return &irv1.ModuleConfig{Id: id, Json: json.RawMessage(`{}`)} }

// twoGateways: a/http and b/http share the HTTP socket on :80, b also has a TLS listener on :443
// with its own certificate; a route of a uses a filter, b's HTTPS route a balancer.
func twoGateways() *irv1.Snapshot {
	route := func(name, cluster string, filters ...*irv1.ModuleConfig) *irv1.Route {
		return &irv1.Route{Name: name, Match: mc("route.http"), Filters: filters, Backends: []*irv1.Backend{{Cluster: cluster, Weight: 1}}}
	}
	snap := &irv1.Snapshot{
		Listeners: []*irv1.Listener{
			{Name: ":80/HTTP", Port: 80, Protocol: "HTTP", Servers: []*irv1.Server{
				{Hostname: "a.example", Sources: []string{"ns/a/http"}, VirtualHosts: []*irv1.VirtualHost{{Hostname: "a.example",
					Routes: []*irv1.Route{route("a1", "ns/a:80", mc("filter.http.request_header_modifier")), route("a2", "ns/a:80")}}}},
				{Hostname: "b.example", Sources: []string{"ns/b/http"}, VirtualHosts: []*irv1.VirtualHost{{Hostname: "b.example",
					Routes: []*irv1.Route{route("b1", "ns/b:80")}}}},
			}},
			{Name: ":443/HTTPS", Port: 443, Protocol: "HTTPS", Servers: []*irv1.Server{
				{Hostname: "b.example", Sources: []string{"ns/b/https"}, Tls: &irv1.TLS{Certificates: []string{"ns/b-cert"}},
					VirtualHosts: []*irv1.VirtualHost{{Hostname: "b.example", Routes: []*irv1.Route{route("b2", "ns/b2:80")}}}},
			}},
		},
		Clusters: []*irv1.Cluster{{Name: "ns/a:80"}, {Name: "ns/b2:80", Balancer: mc("lb.least_conn")}, {Name: "ns/b:80"}},
		Secrets:  []*irv1.Secret{{Name: "ns/b-cert", PrivateKeyPem: []byte("b's key")}},
		Gateways: []*irv1.GatewayGeneration{{Namespace: "ns", Name: "a", Generation: 1}, {Namespace: "ns", Name: "b", Generation: 2}},
	}
	if err := irv1.Seal(snap); err != nil {
		panic(err)
	}
	return snap
}

func names[T interface{ GetName() string }](xs []T) string {
	var out []string
	for _, x := range xs {
		out = append(out, x.GetName())
	}
	return strings.Join(out, ",")
}

func routesOf(snap *irv1.Snapshot) string {
	var out []string
	for _, l := range snap.GetListeners() {
		for _, sv := range l.GetServers() {
			for _, vh := range sv.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					s := r.GetName()
					if be := r.GetBackends(); len(be) == 1 && be[0].GetError() != "" {
						s += "(500)"
					}
					out = append(out, s)
				}
			}
		}
	}
	return strings.Join(out, ",")
}

func TestTailor(t *testing.T) {
	tests := []struct {
		name      string
		gw        *gwKey
		missing   []string
		listeners string
		routes    string
		clusters  string
		secrets   string
		gateways  string
	}{
		{name: "shared proxy with every module: the snapshot itself",
			listeners: ":80/HTTP,:443/HTTPS", routes: "a1,a2,b1,b2", clusters: "ns/a:80,ns/b2:80,ns/b:80", secrets: "ns/b-cert", gateways: "a,b"},
		{name: "dedicated to a: no listener, cluster or key of b", gw: &gwKey{"ns", "a"},
			listeners: ":80/HTTP", routes: "a1,a2", clusters: "ns/a:80", gateways: "a"},
		{name: "dedicated to b", gw: &gwKey{"ns", "b"},
			listeners: ":80/HTTP,:443/HTTPS", routes: "b1,b2", clusters: "ns/b2:80,ns/b:80", secrets: "ns/b-cert", gateways: "b"},
		{name: "missing a filter: its route answers 500", missing: []string{"filter.http.request_header_modifier"},
			listeners: ":80/HTTP,:443/HTTPS", routes: "a1(500),a2,b1,b2", clusters: "ns/a:80,ns/b2:80,ns/b:80", secrets: "ns/b-cert", gateways: "a,b"},
		{name: "missing a listener module: the listener is left out", missing: []string{"listener.https"},
			listeners: ":80/HTTP", routes: "a1,a2,b1", clusters: "ns/a:80,ns/b:80", gateways: "a,b"},
		{name: "missing the route kind: its routes are left out", missing: []string{"route.http"},
			listeners: ":80/HTTP,:443/HTTPS", secrets: "ns/b-cert", gateways: "a,b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			snap := twoGateways()
			before := snap.GetVersion()
			got, err := tailor(snap, tc.gw, tc.missing)
			if err != nil {
				t.Fatal(err)
			}
			if snap.GetVersion() != before || routesOf(snap) != "a1,a2,b1,b2" {
				t.Fatal("the published snapshot was modified")
			}
			if g := names(got.GetListeners()); g != tc.listeners {
				t.Errorf("listeners %q, want %q", g, tc.listeners)
			}
			if g := routesOf(got); g != tc.routes {
				t.Errorf("routes %q, want %q", g, tc.routes)
			}
			if g := names(got.GetClusters()); g != tc.clusters {
				t.Errorf("clusters %q, want %q", g, tc.clusters)
			}
			if g := names(got.GetSecrets()); g != tc.secrets {
				t.Errorf("secrets %q, want %q", g, tc.secrets)
			}
			if g := names(got.GetGateways()); g != tc.gateways {
				t.Errorf("gateways %q, want %q", g, tc.gateways)
			}
			if (tc.gw != nil || len(tc.missing) > 0) == (got.GetVersion() == before) {
				t.Errorf("version %s (published %s)", got.GetVersion(), before)
			}
		})
	}
}

func TestMissingBalancerResetsToDefault(t *testing.T) {
	got, err := tailor(twoGateways(), nil, []string{"lb.least_conn"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got.GetClusters() {
		if c.GetBalancer() != nil {
			t.Fatalf("cluster %s keeps balancer %s", c.GetName(), c.GetBalancer().GetId())
		}
	}
}

// TestMissingPolicyBalancerResetsToDefault: every balancer a CoxswainBackendPolicy can name falls
// back to round robin on a proxy without it, and the cluster keeps the policy's other settings
// (they are the engine's, not a module's).
func TestMissingPolicyBalancerResetsToDefault(t *testing.T) {
	for _, bal := range []*irv1.ModuleConfig{mc("lb.least_conn"), mc("lb.ewma"), {Id: "lb.hash", Json: json.RawMessage(`{"key":"header","name":"X-User"}`)}} {
		t.Run(bal.GetId(), func(t *testing.T) {
			snap := twoGateways()
			c := snap.Clusters[1]
			c.Balancer, c.ConnectTimeoutMs = bal, 500
			c.SessionPersistence = &irv1.SessionPersistence{Type: irv1.SessionPersistence_COOKIE, Name: "s", Key: []byte("k")}
			if missing := missingModules(factsOf(snap).modules, map[string]bool{"route.http": true, "listener.http": true, "listener.https": true,
				"filter.http.request_header_modifier": true}); strings.Join(missing, ",") != bal.GetId() {
				t.Fatalf("missing modules %v, want %s", missing, bal.GetId())
			}
			got, err := tailor(snap, nil, []string{bal.GetId()})
			if err != nil {
				t.Fatal(err)
			}
			gc := got.GetClusters()[1]
			if gc.GetBalancer() != nil || gc.GetConnectTimeoutMs() != 500 || gc.GetSessionPersistence().GetName() != "s" {
				t.Errorf("tailored cluster %v", gc)
			}
			if routesOf(got) != routesOf(snap) {
				t.Errorf("routes %s, want all of %s: a balancer is never a reason to fail a route", routesOf(got), routesOf(snap))
			}
			if c.GetBalancer() == nil {
				t.Error("tailor modified the published snapshot")
			}
		})
	}
}

func TestGatewayListeners(t *testing.T) {
	got := gatewayListeners(twoGateways())
	if strings.Join(got[gwKey{"ns", "a"}], ",") != ":80/HTTP" || strings.Join(got[gwKey{"ns", "b"}], ",") != ":80/HTTP,:443/HTTPS" {
		t.Fatalf("got %v", got)
	}
}

// TestMissingHTTP3ServesHTTPS: a snapshot with HTTP/3 on an HTTPS listener needs listener.http3;
// a proxy without it gets the listener without HTTP/3, never no listener.
func TestMissingHTTP3ServesHTTPS(t *testing.T) {
	snap := twoGateways()
	var https *irv1.Listener
	for _, l := range snap.GetListeners() {
		if l.GetProtocol() == "HTTPS" {
			https = l
		}
	}
	https.Http3 = &irv1.HTTP3{AdvertisedPort: 443}
	have := map[string]bool{"route.http": true, "listener.http": true, "listener.https": true, "lb.least_conn": true,
		"filter.http.request_header_modifier": true}
	if missing := missingModules(factsOf(snap).modules, have); strings.Join(missing, ",") != "listener.http3" {
		t.Fatalf("missing modules %v, want listener.http3", missing)
	}
	got, err := tailor(snap, nil, []string{"listener.http3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.GetListeners()) != len(snap.GetListeners()) {
		t.Fatalf("listeners %d, want all %d", len(got.GetListeners()), len(snap.GetListeners()))
	}
	for _, l := range got.GetListeners() {
		if l.GetHttp3() != nil {
			t.Errorf("listener %s keeps http3 for a proxy without listener.http3", l.GetName())
		}
	}
	if https.GetHttp3() == nil {
		t.Error("tailor modified the published snapshot")
	}
}
