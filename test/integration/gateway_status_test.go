package integration

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var (
	accepted        = cond{"Accepted", "True", "Accepted"}
	programmed      = cond{"Programmed", "True", "Programmed"}
	resolved        = cond{"ResolvedRefs", "True", "ResolvedRefs"}
	noConflicts     = cond{"Conflicted", "False", "NoConflicts"}
	listenerHealthy = []cond{accepted, programmed, resolved, noConflicts}
)

// TestGatewayStatus reads back, from the API server, every GatewayClass and Gateway condition and
// reason the controller writes.
func TestGatewayStatus(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{addresses: []string{gatewayIP, "gw.example.com"}})
	ns := namespace(t, e, "gwstatus", nil)
	other := namespace(t, e, "gwstatus-other", nil)
	createClass(t, e, "coxswain", "")
	startBackend(t, "tls-backend", "10.99.3.1:8080")
	createService(t, e, ns, "svc", "10.99.3.1")

	t.Run("GatewayClass accepted with the build's features", func(t *testing.T) {
		// The build's features that the installed (standard channel) CRDs serve.
		want := claimable(t, e, registry)
		for _, must := range []string{"Gateway", "HTTPRoute", "ReferenceGrant"} {
			if !slices.Contains(want, must) {
				t.Fatalf("the test binary's build does not serve %s: %v", must, want)
			}
		}
		eventually(t, "GatewayClass status", func() error {
			gc, err := e.Gateway.GatewayV1().GatewayClasses().Get(ctxFor(t), "coxswain", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := checkConds(gc.Status.Conditions, gc.Generation, accepted); err != nil {
				return err
			}
			var got []string
			for _, f := range gc.Status.SupportedFeatures {
				got = append(got, string(f.Name))
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("supportedFeatures = %v, want %v", got, want)
			}
			return nil
		})
	})

	t.Run("accepted, programmed, addresses, attached routes", func(t *testing.T) {
		events := watchGateways(t, e, ns)
		l := httpListener("http", 18100)
		l.AllowedRoutes = &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: ptr.To(gwapiv1.NamespacesFromAll)}}
		createGateway(t, e, ns, "ok", "coxswain", l)
		for _, name := range []string{"r1", "r2"} {
			createRoute(t, e, httpRoute(ns, name, []gwapiv1.ParentReference{parentRef(ns, "ok")}, nil, prefixRule("/", backendRef("svc", 1))))
		}
		gw := waitGateway(t, e, ns, "ok", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed); err != nil {
				return err
			}
			if err := listenerConds(gw, "http", listenerHealthy...); err != nil {
				return err
			}
			if l, _ := listener(gw, "http"); l.AttachedRoutes != 2 {
				return fmt.Errorf("attachedRoutes = %d, want 2", l.AttachedRoutes)
			}
			return nil
		})
		wantAddrs := []gwapiv1.GatewayStatusAddress{
			{Type: ptr.To(gwapiv1.IPAddressType), Value: gatewayIP},
			{Type: ptr.To(gwapiv1.HostnameAddressType), Value: "gw.example.com"},
		}
		if addrString(gw.Status.Addresses) != addrString(wantAddrs) {
			t.Errorf("addresses = %v, want %v", gw.Status.Addresses, wantAddrs)
		}
		l0, _ := listener(gw, "http")
		// An HTTP listener without allowedRoutes.kinds takes every HTTP-family kind the build has.
		var kinds []string
		for _, k := range l0.SupportedKinds {
			if ptr.Deref(k.Group, "") != gwapiv1.GroupName {
				t.Errorf("supportedKinds = %+v: kind %s has group %q", l0.SupportedKinds, k.Kind, ptr.Deref(k.Group, ""))
			}
			kinds = append(kinds, string(k.Kind))
		}
		if strings.Join(kinds, ",") != "GRPCRoute,HTTPRoute" {
			t.Errorf("supportedKinds = %v, want [GRPCRoute HTTPRoute]", kinds)
		}
		// Every version of the Gateway the API server ever held: Programmed=True for a generation
		// never came before the address was published.
		for _, v := range events.upTo(gw.ResourceVersion) {
			c := meta.FindStatusCondition(v.Status.Conditions, "Programmed")
			if c != nil && c.Status == metav1.ConditionTrue && len(v.Status.Addresses) == 0 {
				t.Errorf("resourceVersion %s: Programmed=True without status.addresses", v.ResourceVersion)
			}
		}

		// A spec change re-stamps every condition with the new generation.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "ok", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Listeners = append(cur.Spec.Listeners, httpListener("second", 18101))
			_, err = e.Gateway.GatewayV1().Gateways(ns).Update(ctxFor(t), cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		waitGateway(t, e, ns, "ok", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed); err != nil {
				return err
			}
			if err := listenerConds(gw, "second", listenerHealthy...); err != nil {
				return err
			}
			return listenerConds(gw, "http", listenerHealthy...)
		})
	})

	t.Run("unsupported protocol", func(t *testing.T) {
		// A domain-prefixed protocol is valid for the API server and served by no Coxswain build.
		custom := gwapiv1.Listener{Name: "custom", Port: 18103, Protocol: "example.com/custom"}
		createGateway(t, e, ns, "mixed", "coxswain", httpListener("http", 18102), custom)
		createGateway(t, e, ns, "allbad", "coxswain", custom)
		badListener := cond{"Accepted", "False", "UnsupportedProtocol"}
		waitGateway(t, e, ns, "mixed", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, cond{"Accepted", "True", "ListenersNotValid"}, programmed); err != nil {
				return err
			}
			if err := listenerConds(gw, "custom", badListener, cond{"Programmed", "False", "Invalid"}); err != nil {
				return err
			}
			return listenerConds(gw, "http", listenerHealthy...)
		})
		waitGateway(t, e, ns, "allbad", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation,
				cond{"Accepted", "False", "ListenersNotValid"}, cond{"Programmed", "False", "Invalid"}); err != nil {
				return err
			}
			return listenerConds(gw, "custom", badListener)
		})
	})

	t.Run("protocol conflict", func(t *testing.T) {
		tlsSecret(t, e, ns, "conflict-cert", "conflict.example")
		createGateway(t, e, ns, "conflict", "coxswain", httpListener("http", 18104),
			httpsListener("https", 18104, "conflict.example", certRef("", "conflict-cert")))
		conflicted := cond{"Conflicted", "True", "ProtocolConflict"}
		waitGateway(t, e, ns, "conflict", func(gw *gwapiv1.Gateway) error {
			if err := listenerConds(gw, "http", conflicted); err != nil {
				return err
			}
			return listenerConds(gw, "https", conflicted)
		})
	})

	t.Run("hostname conflict across Gateways", func(t *testing.T) {
		tlsSecret(t, e, ns, "dup-1", "dup.example")
		tlsSecret(t, e, ns, "dup-2", "dup.example")
		createGateway(t, e, ns, "dup-first", "coxswain", httpsListener("https", 18105, "dup.example", certRef("", "dup-1")))
		waitGateway(t, e, ns, "dup-first", func(gw *gwapiv1.Gateway) error { return listenerConds(gw, "https", listenerHealthy...) })
		createGateway(t, e, ns, "dup-second", "coxswain", httpsListener("https", 18105, "dup.example", certRef("", "dup-2")))
		waitGateway(t, e, ns, "dup-second", func(gw *gwapiv1.Gateway) error {
			return listenerConds(gw, "https", cond{"Conflicted", "True", "HostnameConflict"})
		})
	})

	t.Run("certificate refs", func(t *testing.T) {
		okCert := tlsSecret(t, e, ns, "cert", "ok.example")
		tlsSecret(t, e, other, "cert", "foreign.example")
		createGateway(t, e, ns, "tls", "coxswain",
			httpsListener("ok", 18106, "ok.example", certRef("", "cert")),
			httpsListener("missing", 18106, "missing.example", certRef("", "nope")),
			httpsListener("foreign", 18106, "foreign.example", certRef(other, "cert")),
		)
		createRoute(t, e, httpRoute(ns, "tls-route", []gwapiv1.ParentReference{parentRef(ns, "tls")}, nil, prefixRule("/", backendRef("svc", 1))))
		waitGateway(t, e, ns, "tls", func(gw *gwapiv1.Gateway) error {
			if err := listenerConds(gw, "ok", listenerHealthy...); err != nil {
				return err
			}
			if err := listenerConds(gw, "missing", cond{"ResolvedRefs", "False", "InvalidCertificateRef"}, cond{"Programmed", "False", "Invalid"}); err != nil {
				return err
			}
			return listenerConds(gw, "foreign", cond{"ResolvedRefs", "False", "RefNotPermitted"}, cond{"Programmed", "False", "Invalid"})
		})
		httpsServed(t, 18106, "ok.example", okCert, "tls-backend")

		// A ReferenceGrant in the Secret's namespace makes the cross-namespace reference resolve.
		_, err := e.Gateway.GatewayV1beta1().ReferenceGrants(other).Create(ctxFor(t), &gwapiv1b1.ReferenceGrant{
			ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "gateways-to-secrets"},
			Spec: gwapiv1b1.ReferenceGrantSpec{
				From: []gwapiv1b1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "Gateway", Namespace: gwapiv1.Namespace(ns)}},
				To:   []gwapiv1b1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitGateway(t, e, ns, "tls", func(gw *gwapiv1.Gateway) error { return listenerConds(gw, "foreign", listenerHealthy...) })
	})

	t.Run("no status address: AddressNotAssigned", func(t *testing.T) {
		const name = "example.com/no-address"
		startController(t, e, controllerOpts{name: name, noAddress: true})
		createClass(t, e, "no-address", name)
		createGateway(t, e, ns, "no-address", "no-address", httpListener("http", 18107))
		waitGateway(t, e, ns, "no-address", func(gw *gwapiv1.Gateway) error {
			if len(gw.Status.Addresses) != 0 {
				return fmt.Errorf("addresses %v", gw.Status.Addresses)
			}
			return checkConds(gw.Status.Conditions, gw.Generation, accepted, cond{"Programmed", "False", "AddressNotAssigned"})
		})
	})
}

func httpsListener(name string, port int, host string, refs ...gwapiv1.SecretObjectReference) gwapiv1.Listener {
	return gwapiv1.Listener{
		Name: gwapiv1.SectionName(name), Port: gwapiv1.PortNumber(port), Protocol: gwapiv1.HTTPSProtocolType,
		Hostname: ptr.To(gwapiv1.Hostname(host)),
		TLS:      &gwapiv1.ListenerTLSConfig{Mode: ptr.To(gwapiv1.TLSModeTerminate), CertificateRefs: refs},
	}
}

func certRef(ns, name string) gwapiv1.SecretObjectReference {
	ref := gwapiv1.SecretObjectReference{Name: gwapiv1.ObjectName(name)}
	if ns != "" {
		ref.Namespace = ptr.To(gwapiv1.Namespace(ns))
	}
	return ref
}

// httpsServed waits until an HTTPS request with SNI host, verified against cert, is served by
// backend.
func httpsServed(t testing.TB, port int, host string, cert *x509.Certificate, backend string) {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host},
	}}
	eventually(t, "HTTPS "+host, func() error {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s:%d/", gatewayIP, port), nil)
		if err != nil {
			return err
		}
		req.Host = host
		res, err := c.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("X-Backend") != backend {
			return fmt.Errorf("got %d from %q", res.StatusCode, res.Header.Get("X-Backend"))
		}
		return nil
	})
}

// gatewayEvents records every version of the Gateways of a namespace, from a watch.
type gatewayEvents struct {
	ch chan *gwapiv1.Gateway
}

func watchGateways(t testing.TB, e *env.Env, ns string) *gatewayEvents {
	t.Helper()
	w, err := e.Gateway.GatewayV1().Gateways(ns).Watch(ctxFor(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	ev := &gatewayEvents{ch: make(chan *gwapiv1.Gateway, 1000)}
	go func() {
		for e := range w.ResultChan() {
			if gw, ok := e.Object.(*gwapiv1.Gateway); ok && e.Type != watch.Error {
				ev.ch <- gw
			}
		}
		close(ev.ch)
	}()
	return ev
}

// upTo returns the versions seen until (and including) resourceVersion rv.
func (ev *gatewayEvents) upTo(rv string) []*gwapiv1.Gateway {
	var out []*gwapiv1.Gateway
	timeout := time.After(waitFor)
	for {
		select {
		case gw, ok := <-ev.ch:
			if !ok {
				return out
			}
			out = append(out, gw)
			if gw.ResourceVersion == rv {
				return out
			}
		case <-timeout:
			return out
		}
	}
}

func addrString(addrs []gwapiv1.GatewayStatusAddress) string {
	s := ""
	for _, a := range addrs {
		s += fmt.Sprintf("%s=%s ", ptr.Deref(a.Type, ""), a.Value)
	}
	return s
}
