package integration

import (
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestDiscoveryFleet runs the controller and two `coxswain proxy` processes, each binding its
// own address, over the discovery protocol with real TLS and a real TokenReview: a route change
// reaches both; Programmed waits for both proxies' binds and acknowledgements; a config-only
// change is not Programmed before every proxy acknowledged it; a port one proxy cannot bind holds
// back only that listener, which it binds once the port is free; Programmed never flips back.
func TestDiscoveryFleet(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctrl := startFleetController(t, e, "controller", ctrlNS, "--leader-elect=false")
	ns := namespace(t, e, "fleet", nil)
	startBackend(t, "v1", "10.99.7.1:8080")
	createService(t, e, ns, "v1", "10.99.7.1")
	startBackend(t, "v2", "10.99.7.2:8080")
	createService(t, e, ns, "v2", "10.99.7.2")
	createClass(t, e, "coxswain", "")
	const port, extraPort = 18700, 18710
	events := watchGateways(t, e, ns)
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", port))
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("v1", 1))))

	waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, cond{"Programmed", "False", "Pending"}); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed"); !strings.Contains(c.Message, "a proxy serving this Gateway to connect") {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})

	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	p1 := startProxyProcess(t, "p1", "10.99.0.21", files, ctrl.discovery)
	p2 := startProxyProcess(t, "p2", "10.99.0.22", files, ctrl.discovery)
	proxies := []*proxyProcess{p1, p2}
	for _, p := range proxies {
		servedAt(t, p.ip, port, "any.example", "/", 200, "v1")
	}
	gw := waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
		return checkConds(gw.Status.Conditions, gw.Generation, programmed)
	})
	listenerName := fmt.Sprintf(":%d/HTTP", port)
	eventually(t, "fleet view", func() error {
		f, err := ctrl.fleet()
		if err != nil {
			return err
		}
		if !f.Leader || len(f.Proxies) != 2 {
			return fmt.Errorf("fleet %+v", f)
		}
		for _, p := range f.Proxies {
			if p.AckedVersion != f.Version || len(p.Bound) != 1 || p.Bound[0].Name != listenerName ||
				p.Bound[0].Address != net.JoinHostPort(map[string]string{"p1": p1.ip, "p2": p2.ip}[p.Node], fmt.Sprint(port)) {
				return fmt.Errorf("proxy %+v", p)
			}
		}
		return nil
	})
	for _, p := range proxies {
		if code, err := p.readyz(); code != 200 {
			t.Fatalf("%s /readyz = %d (%v)", p.name, code, err)
		}
	}

	t.Run("a route change reaches both proxies", func(t *testing.T) {
		updateRoute(t, e, ns, "r", func(r *gwapiv1.HTTPRoute) {
			r.Spec.Rules = append([]gwapiv1.HTTPRouteRule{prefixRule("/new", backendRef("v2", 1))}, r.Spec.Rules...)
		})
		for _, p := range proxies {
			servedAt(t, p.ip, port, "any.example", "/new/x", 200, "v2")
			servedAt(t, p.ip, port, "any.example", "/old", 200, "v1")
		}
	})

	t.Run("a config-only change is not Programmed before every proxy acknowledged it", func(t *testing.T) {
		p2.signal(syscall.SIGSTOP) // alive and connected, but it cannot answer
		defer p2.signal(syscall.SIGCONT)
		before := gw.Generation
		gw = updateGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) {
			gw.Spec.Listeners[0].AllowedRoutes = &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromAll)}}
		})
		var state discovery.GatewayState
		eventually(t, "p1 acknowledged the new generation, p2 not", func() error {
			f, err := ctrl.fleet()
			if err != nil {
				return err
			}
			for _, g := range f.Gateways {
				if g.Gateway == ns+"/gw" {
					state = g
				}
			}
			if state.Generation != gw.Generation {
				return fmt.Errorf("gate at %+v", state)
			}
			for _, p := range f.Proxies {
				if p.Node == "p1" && p.AckedSequence >= state.FirstSequence && p.InFlight == "" {
					return nil
				}
			}
			return fmt.Errorf("p1 has not acknowledged sequence %d yet: %+v", state.FirstSequence, f.Proxies)
		})
		if state.Programmed || !strings.Contains(state.Awaiting, "proxy p2 to acknowledge") {
			t.Fatalf("gate %+v while p2 is stopped", state)
		}
		cur, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "gw", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := meta.FindStatusCondition(cur.Status.Conditions, "Programmed"); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != before {
			t.Fatalf("Programmed = %+v while p2 has not acknowledged generation %d (want True, observedGeneration %d)", c, gw.Generation, before)
		}
		p2.signal(syscall.SIGCONT)
		waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
			return checkConds(gw.Status.Conditions, gw.Generation, programmed)
		})
	})

	t.Run("a port one proxy cannot bind holds back only that listener", func(t *testing.T) {
		// Something else holds the new port on p2's address: p2 applies the snapshot without it.
		blocker, err := net.Listen("tcp", net.JoinHostPort(p2.ip, fmt.Sprint(extraPort)))
		if err != nil {
			t.Fatal(err)
		}
		defer blocker.Close()
		gw = updateGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) {
			gw.Spec.Listeners = append(gw.Spec.Listeners, httpListener("extra", extraPort))
		})
		servedAt(t, p1.ip, extraPort, "any.example", "/new/x", 200, "v2")
		servedAt(t, p2.ip, port, "any.example", "/new/x", 200, "v2")
		eventually(t, "p2's failure in the fleet view", func() error {
			f, err := ctrl.fleet()
			if err != nil {
				return err
			}
			for _, p := range f.Proxies {
				if p.Node == "p2" && len(p.Failed) == 1 && strings.Contains(p.Failed[0].Message, "address already in use") && p.LastRejection == nil {
					return nil
				}
			}
			return fmt.Errorf("no failure from p2: %+v", f.Proxies)
		})
		waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, programmed); err != nil {
				return err
			}
			if err := listenerConds(gw, "http", programmed); err != nil {
				return err
			}
			if err := listenerConds(gw, "extra", cond{"Programmed", "False", "Pending"}); err != nil {
				return err
			}
			l, _ := listener(gw, "extra")
			if c := meta.FindStatusCondition(l.Conditions, "Programmed"); !strings.Contains(c.Message, "proxy p2 cannot bind "+p2.ip) &&
				!strings.Contains(c.Message, "Proxy p2 cannot bind "+p2.ip) {
				return fmt.Errorf("listener extra: message %q", c.Message)
			}
			return nil
		})
		// Once the port is free, p2 binds it on its own: no new snapshot.
		blocker.Close()
		servedAt(t, p2.ip, extraPort, "any.example", "/new/x", 200, "v2")
		waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
			return listenerConds(gw, "extra", programmed)
		})
	})

	t.Run("admin endpoints", func(t *testing.T) {
		for _, c := range []struct{ addr, path, want string }{
			{ctrl.admin, "/api/v1/health", `"leader": true`},
			{ctrl.admin, "/metrics", "coxswain_discovery_streams 2"},
			{ctrl.admin, "/metrics", "coxswain_discovery_nacks_total 0"},
			{ctrl.admin, "/api/v1/fleet/proxies/p1/routes", `"name": ":18710/HTTP"`},
			{p1.admin, "/api/v1/health", `"component": "proxy"`},
			{p1.admin, "/metrics", "coxswain_proxy_discovery_connected 1"},
		} {
			body, err := httpGet("http://" + c.addr + c.path)
			if err != nil || !strings.Contains(body, c.want) {
				t.Errorf("GET %s%s: %v, no %q in:\n%s", c.addr, c.path, err, c.want, tail(body, 2000))
			}
		}
	})

	t.Run("Programmed never flipped back", func(t *testing.T) {
		cur, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "gw", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		programmedOnce(t, events, cur.ResourceVersion)
	})
}

// programmedOnce checks that once a Gateway was Programmed=True, no later version of it says
// anything else.
func programmedOnce(t *testing.T, events *gatewayEvents, rv string) {
	t.Helper()
	seenTrue := false
	for _, v := range events.upTo(rv) {
		c := meta.FindStatusCondition(v.Status.Conditions, "Programmed")
		isTrue := c != nil && c.Status == metav1.ConditionTrue
		if seenTrue && !isTrue {
			t.Errorf("resourceVersion %s (generation %d): Programmed went back to %+v", v.ResourceVersion, v.Generation, c)
		}
		seenTrue = seenTrue || isTrue
	}
	if !seenTrue {
		t.Error("never Programmed")
	}
}
