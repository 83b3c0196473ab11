package integration

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestBindFailure runs the controller and a `coxswain proxy` process serving two Gateways, one of
// whose ports something else holds on the proxy's host. The proxy applies the snapshot with the
// other Gateway's listener: that Gateway is Programmed, serves, and keeps getting updates; the
// blocked one's listener is Programmed=False with a message naming the proxy, the address and the
// error, the fleet view and the metrics show it, and once the port is free the proxy binds it on
// its own (no new snapshot) and the conditions clear.
func TestBindFailure(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctrl := startFleetController(t, e, "controller", ctrlNS, "--leader-elect=false")
	ns := namespace(t, e, "bindfail", nil)
	startBackend(t, "v1", "10.99.8.1:8080")
	createService(t, e, ns, "v1", "10.99.8.1")
	startBackend(t, "v2", "10.99.8.2:8080")
	createService(t, e, ns, "v2", "10.99.8.2")
	createClass(t, e, "coxswain", "")
	const okPort, blockedPort = 18730, 18731
	const proxyIP = "10.99.0.41"
	blocker, err := net.Listen("tcp", net.JoinHostPort(proxyIP, fmt.Sprint(blockedPort)))
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()

	createGateway(t, e, ns, "ok", "coxswain", httpListener("http", okPort))
	createGateway(t, e, ns, "blocked", "coxswain", httpListener("http", blockedPort))
	createRoute(t, e, httpRoute(ns, "r-ok", []gwapiv1.ParentReference{parentRef(ns, "ok")}, nil, prefixRule("/", backendRef("v1", 1))))
	createRoute(t, e, httpRoute(ns, "r-blocked", []gwapiv1.ParentReference{parentRef(ns, "blocked")}, nil, prefixRule("/", backendRef("v1", 1))))
	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	p := startProxyProcess(t, "p1", proxyIP, files, ctrl.discovery)

	servedAt(t, proxyIP, okPort, "any.example", "/", 200, "v1")
	waitGateway(t, e, ns, "ok", func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, programmed); err != nil {
			return err
		}
		return listenerConds(gw, "http", programmed)
	})
	wantMsg := fmt.Sprintf("Proxy p1 cannot bind %s:%d: ", proxyIP, blockedPort)
	waitGateway(t, e, ns, "blocked", func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, cond{"Accepted", "True", "Accepted"},
			cond{"Programmed", "False", "Pending"}); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(gw.Status.Conditions, "Programmed"); !strings.Contains(c.Message, "No listener can be bound") {
			return fmt.Errorf("Gateway Programmed message %q", c.Message)
		}
		if err := listenerConds(gw, "http", cond{"Accepted", "True", "Accepted"}, cond{"Programmed", "False", "Pending"}); err != nil {
			return err
		}
		l, _ := listener(gw, "http")
		if c := meta.FindStatusCondition(l.Conditions, "Programmed"); !strings.HasPrefix(c.Message, wantMsg) || !strings.Contains(c.Message, "address already in use") {
			return fmt.Errorf("listener Programmed message %q, want %q... address already in use", c.Message, wantMsg)
		}
		return nil
	})

	t.Run("the other Gateway keeps getting updates", func(t *testing.T) {
		updateRoute(t, e, ns, "r-ok", func(r *gwapiv1.HTTPRoute) {
			r.Spec.Rules = append([]gwapiv1.HTTPRouteRule{prefixRule("/new", backendRef("v2", 1))}, r.Spec.Rules...)
		})
		servedAt(t, proxyIP, okPort, "any.example", "/new/x", 200, "v2")
		servedAt(t, proxyIP, okPort, "any.example", "/old", 200, "v1")
		waitGateway(t, e, ns, "ok", func(gw *gwapiv1.Gateway) error {
			return checkConds(gw.Status.Conditions, gw.Generation, programmed)
		})
	})

	t.Run("fleet view and metrics", func(t *testing.T) {
		eventually(t, "the failure in the fleet view", func() error {
			f, err := ctrl.fleet()
			if err != nil {
				return err
			}
			if len(f.Proxies) != 1 || len(f.Proxies[0].Failed) != 1 || f.Proxies[0].Failed[0].Name != fmt.Sprintf(":%d/HTTP", blockedPort) ||
				f.Proxies[0].LastRejection != nil {
				return fmt.Errorf("proxies %+v", f.Proxies)
			}
			for _, g := range f.Gateways {
				if (g.Gateway == ns+"/blocked") != (g.Unbound != "") {
					return fmt.Errorf("gateway %+v", g)
				}
			}
			return nil
		})
		for _, c := range []struct{ addr, path, want string }{
			{ctrl.admin, "/metrics", "coxswain_discovery_listener_bind_failures 1"},
			{ctrl.admin, "/metrics", "coxswain_discovery_nacks_total 0"},
			{p.admin, "/metrics", "coxswain_proxy_listeners_failed 1"},
			{p.admin, "/api/v1/health", `"failedListeners"`},
		} {
			body, err := httpGet("http://" + c.addr + c.path)
			if err != nil || !strings.Contains(body, c.want) {
				t.Errorf("GET %s%s: %v, no %q in:\n%s", c.addr, c.path, err, c.want, tail(body, 2000))
			}
		}
	})

	t.Run("a freed port is bound and the conditions clear", func(t *testing.T) {
		blocker.Close()
		servedAt(t, proxyIP, blockedPort, "any.example", "/", 200, "v1")
		waitGateway(t, e, ns, "blocked", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, programmed); err != nil {
				return err
			}
			return listenerConds(gw, "http", programmed)
		})
	})
}
