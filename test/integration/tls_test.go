package integration

import (
	"crypto/x509"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestTLSRoute: TLSRoutes through the API server on one port carrying a Passthrough and a
// Terminate listener (mixed mode), driven by crypto/tls clients with different SNIs. Each
// connection is checked for the certificate that answered (the backend's own for passthrough,
// the listener's Secret for termination) and the backend that greeted it; an SNI that matches
// neither listener, and a ClientHello without SNI, are dropped. Statuses: the routes, the
// listeners, a newer route that loses a hostname, a missing backend, and a Terminate listener
// whose certificate Secret does not exist until the test creates it.
func TestTLSRoute(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "tls", nil)

	// Passthrough backends terminate TLS themselves, each with its own certificate.
	exactPair, exactCert := keyPair(t, "a.pass.example")
	wildPair, wildCert := keyPair(t, "*.pass.example")
	startNameServer(t, "pass-exact", "10.99.30.1:8080", &exactPair)
	startNameServer(t, "pass-wild", "10.99.30.2:8080", &wildPair)
	// Terminate backends see plaintext.
	startNameServer(t, "term-b", "10.99.30.3:8080", nil)
	startNameServer(t, "term-late", "10.99.30.4:8080", nil)
	for svc, ip := range map[string]string{"pass-exact": "10.99.30.1", "pass-wild": "10.99.30.2",
		"term-b": "10.99.30.3", "term-late": "10.99.30.4"} {
		createService(t, e, ns, svc, ip)
	}
	termCert := tlsSecret(t, e, ns, "term-cert", "*.term.example")
	roots := x509.NewCertPool()
	for _, c := range []*x509.Certificate{exactCert, wildCert, termCert} {
		roots.AddCert(c)
	}

	createClass(t, e, "tls", "")
	const port, brokenPort = 19000, 19001
	createGateway(t, e, ns, "gw", "tls",
		tlsListener("pass", port, "*.pass.example", gwapiv1.TLSModePassthrough),
		tlsListener("term", port, "*.term.example", gwapiv1.TLSModeTerminate, certRef("", "term-cert")),
		tlsListener("broken", brokenPort, "*.late.example", gwapiv1.TLSModeTerminate, certRef("", "late-cert")),
	)
	createTLSRoute(t, e, ns, "pass-exact", sectionRef(ns, "gw", "pass"), []string{"a.pass.example"}, l4Ref("pass-exact", 80, 1))
	createTLSRoute(t, e, ns, "pass-wild", sectionRef(ns, "gw", "pass"), []string{"*.pass.example"}, l4Ref("pass-wild", 80, 1))
	createTLSRoute(t, e, ns, "term-b", sectionRef(ns, "gw", "term"), []string{"b.term.example"}, l4Ref("term-b", 80, 1))
	createTLSRoute(t, e, ns, "late", sectionRef(ns, "gw", "broken"), []string{"x.late.example"}, l4Ref("term-late", 80, 1))

	for _, name := range []string{"pass-exact", "pass-wild", "term-b"} {
		l4RouteConds(t, e, "TLSRoute", ns, name, []string{"Conflicted", "PartiallyInvalid"}, accepted, resolved)
	}
	tlsKinds := []string{"TLSRoute"}
	waitListener(t, e, ns, "gw", "pass", tlsKinds, 2, listenerHealthy...)
	waitListener(t, e, ns, "gw", "term", tlsKinds, 1, listenerHealthy...)

	t.Run("SNI picks the listener, the route and the certificate", func(t *testing.T) {
		cases := []struct {
			name, sni, backend string
			cert               *x509.Certificate
		}{
			{"passthrough, exact hostname", "a.pass.example", "pass-exact", exactCert},
			{"passthrough, wildcard hostname", "zz.pass.example", "pass-wild", wildCert},
			{"terminate", "b.term.example", "term-b", termCert},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) { tlsServed(t, port, tc.sni, roots, tc.cert, tc.backend) })
		}
	})
	t.Run("unknown SNI and no SNI are dropped", func(t *testing.T) {
		for _, sni := range []string{"nobody.example", "c.term.example", "a.b.pass.example.net", ""} {
			tlsDropped(t, port, sni)
		}
	})
	t.Run("a newer route loses its hostname to an older one", func(t *testing.T) {
		// Creation timestamps have one-second resolution; on a tie "<namespace>/<name>" decides,
		// and "pass-exact" sorts before "pass-exact-too".
		createTLSRoute(t, e, ns, "pass-exact-too", sectionRef(ns, "gw", "pass"), []string{"a.pass.example"}, l4Ref("pass-wild", 80, 1))
		l4RouteConds(t, e, "TLSRoute", ns, "pass-exact-too", nil,
			accepted, resolved, cond{translator.RouteConditionConflicted, "True", translator.RouteReasonShadowed})
		waitListener(t, e, ns, "gw", "pass", tlsKinds, 3, listenerHealthy...)
		tlsServed(t, port, "a.pass.example", roots, exactCert, "pass-exact")
	})
	t.Run("a missing backend Service", func(t *testing.T) {
		createTLSRoute(t, e, ns, "term-gone", sectionRef(ns, "gw", "term"), []string{"gone.term.example"}, l4Ref("no-such-svc", 80, 1))
		l4RouteConds(t, e, "TLSRoute", ns, "term-gone", nil, accepted, cond{"ResolvedRefs", "False", "BackendNotFound"})
		// The handshake completes (the listener's certificate), then the connection is closed:
		// the rule has no backend to splice to.
		eventually(t, "gone.term.example closed after the handshake", func() error {
			ans, err := tlsHello(port, "gone.term.example", roots)
			if err == nil {
				return fmt.Errorf("served by %q", ans.backend)
			}
			if ans.cert == nil || !ans.cert.Equal(termCert) {
				return fmt.Errorf("no handshake with the listener's certificate: %v", err)
			}
			return nil
		})
		tlsServed(t, port, "b.term.example", roots, termCert, "term-b")
	})
	t.Run("a Terminate listener whose certificate Secret is missing", func(t *testing.T) {
		notProgrammed := []cond{accepted, {"ResolvedRefs", "False", "InvalidCertificateRef"}, {"Programmed", "False", "Invalid"}}
		waitListener(t, e, ns, "gw", "broken", tlsKinds, 1, notProgrammed...)
		// The route is attached (Accepted, counted) but gets no traffic: nothing listens there.
		l4RouteConds(t, e, "TLSRoute", ns, "late", nil, accepted, resolved)
		refused(t, brokenPort)
		// The mixed port keeps serving.
		tlsServed(t, port, "b.term.example", roots, termCert, "term-b")

		lateCert := tlsSecret(t, e, ns, "late-cert", "*.late.example")
		roots.AddCert(lateCert)
		waitListener(t, e, ns, "gw", "broken", tlsKinds, 1, listenerHealthy...)
		tlsServed(t, brokenPort, "x.late.example", roots, lateCert, "term-late")
	})
}

func tlsListener(name string, port int, host string, mode gwapiv1.TLSModeType, refs ...gwapiv1.SecretObjectReference) gwapiv1.Listener {
	return gwapiv1.Listener{
		Name: gwapiv1.SectionName(name), Port: gwapiv1.PortNumber(port), Protocol: gwapiv1.TLSProtocolType,
		Hostname: ptr.To(gwapiv1.Hostname(host)),
		TLS:      &gwapiv1.ListenerTLSConfig{Mode: ptr.To(mode), CertificateRefs: refs},
	}
}

func createTLSRoute(t testing.TB, e *env.Env, ns, name string, parent gwapiv1.ParentReference, hosts []string, refs ...gwapiv1.BackendRef) {
	t.Helper()
	r := &gwapiv1.TLSRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	r.Spec.ParentRefs = []gwapiv1.ParentReference{parent}
	for _, h := range hosts {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwapiv1.Hostname(h))
	}
	r.Spec.Rules = []gwapiv1.TLSRouteRule{{BackendRefs: refs}}
	if _, err := e.Gateway.GatewayV1().TLSRoutes(ns).Create(ctxFor(t), r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
