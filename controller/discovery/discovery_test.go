package discovery_test

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
)

const gwA = "apps/a"

// TestPushAckProgrammed: two shared proxies get the snapshot and serve it; a Gateway generation is
// applied only once both have bound its listener and acknowledged a snapshot carrying it.
func TestPushAckProgrammed(t *testing.T) {
	s := startServer(t)
	s.lead(t)
	host, port := backendServer(t, "v1")
	host2, port2 := backendServer(t, "v2")
	clusters := []cluster{{"apps/v1:80", host, port}, {"apps/v2:80", host2, port2}}
	ln := listenerName("127.0.0.1", 0)

	s.publish(t, snapshot(t, []gw{{ns: "apps", name: "a", gen: 1, address: "127.0.0.1",
		routes: []route{{prefix: "/", cluster: "apps/v1:80"}}}}, clusters...))
	if got := s.report.lastPending(gwA); !strings.Contains(got, "a proxy serving this Gateway to connect") {
		t.Fatalf("pending with no proxy = %q", got)
	}

	p1 := startProxy(t, s, proxyOpts{node: "p1", token: "shared-token"})
	s.waitApplied(t, gwA, 1)
	p1.waitServes(t, ln, "/x", 200, "v1 /x")
	p2 := startProxy(t, s, proxyOpts{node: "p2", token: "shared-token"})
	p2.waitServes(t, ln, "/x", 200, "v1 /x")

	t.Run("a route change reaches both proxies; applied after both acknowledged", func(t *testing.T) {
		snap := snapshot(t, []gw{{ns: "apps", name: "a", gen: 2, address: "127.0.0.1",
			routes: []route{{prefix: "/new", cluster: "apps/v2:80"}, {prefix: "/", cluster: "apps/v1:80"}}}}, clusters...)
		s.publish(t, snap)
		s.waitApplied(t, gwA, 2)
		for _, p := range []*testProxy{p1, p2} {
			if p.Version() != snap.GetVersion() {
				t.Fatalf("applied generation 2 while a proxy serves %s, not %s", p.Version(), snap.GetVersion())
			}
			p.waitServes(t, ln, "/new/y", 200, "v2 /new/y")
		}
		f := s.Fleet()
		if !f.Leader || len(f.Proxies) != 2 {
			t.Fatalf("fleet = %+v", f)
		}
		for _, pv := range f.Proxies {
			if pv.AckedVersion != snap.GetVersion() || len(pv.Bound) != 1 || pv.Bound[0].Name != ln {
				t.Fatalf("fleet proxy %+v", pv)
			}
		}
	})

	t.Run("a proxy that cannot build a snapshot rejects it and keeps its table; the generation waits", func(t *testing.T) {
		// Generation 3 carries a match config no route module accepts: every proxy rejects it.
		bad := snapshot(t, []gw{{ns: "apps", name: "a", gen: 3, address: "127.0.0.1", routes: []route{{prefix: "/", cluster: "apps/v2:80"}}}}, clusters...)
		bad.GetListeners()[0].GetServers()[0].GetVirtualHosts()[0].GetRoutes()[0].GetMatch().Json = []byte(`{"bogus":1}`)
		if err := irv1.Seal(bad); err != nil {
			t.Fatal(err)
		}
		s.publish(t, bad)
		eventually(t, "rejection reported", func() error {
			if m := s.report.lastPending(gwA); !strings.Contains(m, "rejected snapshot") || !strings.Contains(m, "bogus") {
				return fmt.Errorf("pending %q", m)
			}
			return nil
		})
		p1.waitServes(t, ln, "/new/y", 200, "v2 /new/y") // still the old table
		if got := s.report.appliedGen(gwA); got != 2 {
			t.Fatalf("generation %d applied after a rejection", got)
		}
		// The pending message shows the first rejection; the other proxy's may still be on its way.
		eventually(t, "every proxy's rejection in the fleet view", func() error {
			for _, pv := range s.Fleet().Proxies {
				if pv.LastRejection == nil {
					return fmt.Errorf("proxy %s: no rejection in the fleet view", pv.Node)
				}
			}
			return nil
		})
		s.publish(t, snapshot(t, []gw{{ns: "apps", name: "a", gen: 4, address: "127.0.0.1",
			routes: []route{{prefix: "/", cluster: "apps/v2:80"}}}}, clusters...))
		s.waitApplied(t, gwA, 4)
		p2.waitServes(t, ln, "/new/y", 200, "v2 /new/y")
	})

	t.Run("a port a proxy cannot bind holds back only its own listener", func(t *testing.T) {
		busy, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Close()
		busyPort := uint32(busy.Addr().(*net.TCPAddr).Port)
		busyLn := listenerName("127.0.0.1", busyPort)
		// Gateway busy listens on a port something else holds: both proxies apply the snapshot
		// with Gateway a's listener, and report the other.
		s.publish(t, snapshot(t, []gw{
			{ns: "apps", name: "a", gen: 5, address: "127.0.0.1", routes: []route{{prefix: "/", cluster: "apps/v1:80"}}},
			{ns: "apps", name: "busy", gen: 1, address: "127.0.0.1", port: busyPort, routes: []route{{prefix: "/", cluster: "apps/v2:80"}}},
		}, clusters...))
		s.waitApplied(t, gwA, 5)
		s.waitApplied(t, "apps/busy", 1)
		for _, p := range []*testProxy{p1, p2} {
			p.waitServes(t, ln, "/new/y", 200, "v1 /new/y")
		}
		eventually(t, "both proxies' failures reported for Gateway busy", func() error {
			fs := s.report.unboundOf("apps/busy")
			if len(fs) != 2 || fs[0].Proxy != "p1" || fs[1].Proxy != "p2" {
				return fmt.Errorf("unbound %+v", fs)
			}
			for _, f := range fs {
				if f.Listener != "http" || f.Address != net.JoinHostPort("127.0.0.1", fmt.Sprint(busyPort)) ||
					!strings.Contains(f.Error, "address already in use") || f.AddressNotUsable {
					return fmt.Errorf("failure %+v", f)
				}
			}
			return nil
		})
		if fs := s.report.unboundOf(gwA); len(fs) != 0 {
			t.Fatalf("Gateway a reported unbound: %+v", fs)
		}
		f := s.Fleet()
		for _, pv := range f.Proxies {
			if len(pv.Failed) != 1 || pv.Failed[0].Name != busyLn || pv.Failed[0].Reason != "BIND_FAILURE_REASON_ADDRESS_IN_USE" || pv.LastRejection != nil {
				t.Fatalf("fleet proxy %+v", pv)
			}
		}
		for _, g := range f.Gateways {
			if (g.Gateway == "apps/busy") != (g.Unbound != "") || !g.Programmed {
				t.Fatalf("fleet gateway %+v", g)
			}
		}
		// Once only p1 is left and the port is free, p1 binds it on its own: no new snapshot.
		p2.stop()
		busy.Close()
		p1.waitServes(t, busyLn, "/z", 200, "v2 /z")
		eventually(t, "the failure cleared", func() error {
			if fs := s.report.unboundOf("apps/busy"); len(fs) != 0 {
				return fmt.Errorf("unbound %+v", fs)
			}
			return nil
		})
	})

	t.Run("a config-only change is not applied before the proxies acknowledge it", func(t *testing.T) {
		p2.stop() // a proxy that went away no longer counts
		s.publish(t, snapshot(t, []gw{{ns: "apps", name: "a", gen: 6, address: "127.0.0.1",
			routes: []route{{prefix: "/", cluster: "apps/v1:80"}}}}, clusters...))
		s.waitApplied(t, gwA, 6)
		p1.waitServes(t, ln, "/z", 200, "v1 /z")
	})
}

// TestModuleAware: a proxy built without a filter module is never sent a snapshot naming it; the
// route needing it answers 500 there, and nothing is rejected.
func TestModuleAware(t *testing.T) {
	s := startServer(t)
	s.lead(t)
	host, port := backendServer(t, "be")
	ln := listenerName("127.0.0.1", 0)
	full := startProxy(t, s, proxyOpts{node: "full", token: "shared-token"})
	reduced := startProxy(t, s, proxyOpts{node: "reduced", token: "shared-token", registry: without(headers.RequestModuleID)})
	s.publish(t, snapshot(t, []gw{{ns: "apps", name: "a", gen: 1, address: "127.0.0.1", routes: []route{
		{prefix: "/filtered", cluster: "apps/be:80", filters: []*irv1.ModuleConfig{headerFilter("X-Test", "set")}},
		{prefix: "/", cluster: "apps/be:80"},
	}}}, cluster{"apps/be:80", host, port}))
	s.waitApplied(t, gwA, 1)
	full.waitServes(t, ln, "/filtered", 200, "be /filtered set")
	reduced.waitServes(t, ln, "/filtered", 500, "")
	reduced.waitServes(t, ln, "/plain", 200, "be /plain")
	eventually(t, "the module gap reported for the route", func() error {
		want := controller.RouteModuleGap{Kind: "HTTPRoute", Namespace: "apps", Name: "a", Rule: 0,
			GatewayNamespace: "apps", GatewayName: "a", Section: "http", Proxy: "reduced", Module: headers.RequestModuleID}
		if got := s.report.modulesMissing(); len(got) != 1 || got[0] != want {
			return fmt.Errorf("gaps %+v, want %+v", got, want)
		}
		return nil
	})
	for _, pv := range s.Fleet().Proxies {
		want := pv.Node == "reduced"
		if got := len(pv.MissingModules) == 1 && pv.MissingModules[0] == headers.RequestModuleID; got != want || pv.LastRejection != nil {
			t.Fatalf("proxy %s: missing %v, rejection %+v", pv.Node, pv.MissingModules, pv.LastRejection)
		}
	}
	reduced.stop()
	eventually(t, "the gap cleared once the proxy lacking the module left", func() error {
		if got := s.report.modulesMissing(); len(got) != 0 {
			return fmt.Errorf("gaps %+v", got)
		}
		return nil
	})
}

// TestDedicated: a dedicated proxy gets only its Gateway, and only it counts for that Gateway.
func TestDedicated(t *testing.T) {
	s := startServer(t)
	s.lead(t)
	host, port := backendServer(t, "be")
	be := cluster{"apps/be:80", host, port}
	a := gw{ns: "apps", name: "a", gen: 1, address: "127.0.0.1", routes: []route{{prefix: "/", cluster: be.name}}}
	b := gw{ns: "apps", name: "b", gen: 1, address: "::1", routes: []route{{prefix: "/", cluster: be.name}}}
	s.publish(t, snapshot(t, []gw{a, b}, be))
	pa := startProxy(t, s, proxyOpts{node: "dedicated-a", token: "gw-a-token", gateway: "apps/a"})
	s.waitApplied(t, gwA, 1)
	pa.waitServes(t, listenerName("127.0.0.1", 0), "/", 200, "be /")
	if got := s.report.appliedGen("apps/b"); got != 0 {
		t.Fatalf("Gateway b applied (generation %d) with only a's dedicated proxy connected", got)
	}
	sent, ok := s.SentTo("dedicated-a")
	if !ok || len(sent.GetListeners()) != 1 || len(sent.GetGateways()) != 1 || sent.GetGateways()[0].GetName() != "a" {
		t.Fatalf("dedicated proxy was sent %v", sent)
	}
	startProxy(t, s, proxyOpts{node: "dedicated-b", token: "gw-b-token", gateway: "apps/b"})
	s.waitApplied(t, "apps/b", 1)
}

// TestLeadershipHandOver: when the term ends, proxies keep serving, reconnect to the next term,
// and a snapshot they already serve is acknowledged without being sent again.
func TestLeadershipHandOver(t *testing.T) {
	s := startServer(t)
	s.lead(t)
	host, port := backendServer(t, "be")
	snap := snapshot(t, []gw{{ns: "apps", name: "a", gen: 1, address: "127.0.0.1", routes: []route{{prefix: "/", cluster: "apps/be:80"}}}},
		cluster{"apps/be:80", host, port})
	s.publish(t, snap)
	p := startProxy(t, s, proxyOpts{node: "p", token: "shared-token"})
	s.waitApplied(t, gwA, 1)
	ln := listenerName("127.0.0.1", 0)
	p.waitServes(t, ln, "/", 200, "be /")

	s.stepDown(t)
	eventually(t, "proxy notices the term ended", func() error {
		if p.agent.Connected() {
			return fmt.Errorf("still connected")
		}
		return nil
	})
	p.waitServes(t, ln, "/", 200, "be /") // serving its last snapshot while disconnected
	s.report = newReporter()
	s.lead(t)
	s.publish(t, snap)
	s.waitApplied(t, gwA, 1)
	if f := s.Fleet(); len(f.Proxies) != 1 || f.Proxies[0].AckedVersion != snap.GetVersion() {
		t.Fatalf("fleet after hand-over: %+v", f)
	}
}

// TestSVIDRotation: a proxy renews its SVID at half life; when the SVID its stream was opened
// with expires, the controller ends the stream and the proxy reconnects with the new one, serving
// throughout.
func TestSVIDRotation(t *testing.T) {
	s := startServer(t, func(o *discovery.Options) { o.SVIDTTL = 3 * time.Second })
	s.lead(t)
	host, port := backendServer(t, "be")
	s.publish(t, snapshot(t, []gw{{ns: "apps", name: "a", gen: 1, address: "127.0.0.1", routes: []route{{prefix: "/", cluster: "apps/be:80"}}}},
		cluster{"apps/be:80", host, port}))
	p := startProxy(t, s, proxyOpts{node: "p", token: "shared-token"})
	s.waitApplied(t, gwA, 1)
	first := p.agent.Status().CertUntil
	connected := s.Fleet().Proxies[0].Connected
	eventually(t, "SVID renewed before it expired", func() error {
		if st := p.agent.Status(); !st.CertUntil.After(first) {
			return fmt.Errorf("certificate still valid until %s", st.CertUntil)
		}
		if time.Now().After(first) {
			t.Fatalf("the SVID expired (%s) before it was renewed", first)
		}
		return nil
	})
	eventually(t, "stream reopened with the renewed SVID", func() error {
		f := s.Fleet()
		if len(f.Proxies) != 1 || !f.Proxies[0].Connected.After(connected) || !f.Proxies[0].CertUntil.After(first) {
			return fmt.Errorf("fleet %+v", f.Proxies)
		}
		return nil
	})
	p.waitServes(t, listenerName("127.0.0.1", 0), "/", 200, "be /")
}
