package integration

import (
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/dashboard"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestDashboardMetricsExported runs a controller and a proxy against the real API server, sends
// traffic (an HTTP request, an HTTPS request, a failed TLS handshake and a request to a backend
// that refuses connections) with a TCPRoute, a UDPRoute, a circuit breaker and a RateLimit in the
// configuration, and then checks that every metric an expression of deploy/grafana/coxswain.json
// names appears on the /metrics of one of them, with the histogram suffixes as Prometheus
// exposes them.
func TestDashboardMetricsExported(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctrl := startFleetController(t, e, "controller", ctrlNS, "--leader-elect=false")
	ns := namespace(t, e, "dash", nil)
	startBackend(t, "v1", "10.99.17.1:8080")
	createService(t, e, ns, "v1", "10.99.17.1")
	createService(t, e, ns, "dead", "10.99.17.2") // nothing listens there: connections are refused
	startUDPEcho(t, "echo", "10.99.17.3:8053")
	createUDPService(t, e, ns, "echo", "10.99.17.3")
	createClass(t, e, "coxswain", "")
	tlsSecret(t, e, ns, "cert", "secure.example")
	const port, tlsPort, tcpPort, udpPort = 18800, 18801, 18802, 18803
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", port),
		httpsListener("https", tlsPort, "secure.example", certRef("", "cert")),
		gwapiv1.Listener{Name: "tcp", Port: tcpPort, Protocol: gwapiv1.TCPProtocolType},
		gwapiv1.Listener{Name: "udp", Port: udpPort, Protocol: gwapiv1.UDPProtocolType})
	if _, err := e.Dynamic.Resource(rateLimitGVR).Namespace(ns).Create(ctxFor(t), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.coxswain-labs.dev/v1alpha1", "kind": "RateLimit",
		"metadata": map[string]any{"namespace": ns, "name": "dash"}, "spec": map[string]any{"requests": int64(1000), "unit": "Hour"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	limited := prefixRule("/limited", backendRef("v1", 1))
	limited.Filters = []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &gwapiv1.LocalObjectReference{
		Group: "gateway.coxswain-labs.dev", Kind: "RateLimit", Name: "dash"}}}
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil,
		prefixRule("/", backendRef("v1", 1)), prefixRule("/dead", backendRef("dead", 1)), limited))
	createPolicy(t, e, ns, "breaker", map[string]any{"targetRefs": []any{serviceTarget("v1")},
		"circuitBreaker": map[string]any{"threshold": int64(50)}})
	tcp := &gwapiv1.TCPRoute{}
	tcp.Namespace, tcp.Name = ns, "tcp"
	tcp.Spec.ParentRefs = []gwapiv1.ParentReference{sectionRef(ns, "gw", "tcp")}
	tcp.Spec.Rules = []gwapiv1.TCPRouteRule{{BackendRefs: []gwapiv1.BackendRef{l4Ref("v1", 80, 1)}}}
	if _, err := e.Gateway.GatewayV1().TCPRoutes(ns).Create(ctxFor(t), tcp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createUDPRoute(t, e, ns, "udp", sectionRef(ns, "gw", "udp"), l4Ref("echo", 53, 1))

	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	p := startProxyProcess(t, "p1", "10.99.0.31", files, ctrl.discovery)
	servedAt(t, p.ip, port, "any.example", "/", 200, "v1")
	servedAt(t, p.ip, port, "any.example", "/dead", 502, "")
	servedAt(t, p.ip, port, "any.example", "/limited", 200, "v1")
	addr := net.JoinHostPort(p.ip, strconv.Itoa(tlsPort))
	eventually(t, "an HTTPS request answered", func() error {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "secure.example", InsecureSkipVerify: true}) //nolint:gosec // the test's certificate
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: secure.example\r\nConnection: close\r\n\r\n"); err != nil {
			return err
		}
		buf := make([]byte, 12)
		if _, err := c.Read(buf); err != nil || !strings.HasPrefix(string(buf), "HTTP/1.1 200") {
			return fmt.Errorf("answer %q (%v)", buf, err)
		}
		return nil
	})
	if raw, err := net.Dial("tcp", addr); err == nil {
		_ = tls.Client(raw, &tls.Config{ServerName: "secure.example"}).Handshake() //nolint:gosec // must fail: untrusted
		_ = raw.Close()
	}

	exprs, err := dashboard.Load(filepath.Join("..", "..", "deploy", "grafana", "coxswain.json"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "every dashboard metric exported", func() error {
		var scraped strings.Builder
		for _, a := range []string{ctrl.admin, p.admin} {
			body, err := httpGet("http://" + a + "/metrics")
			if err != nil {
				return err
			}
			scraped.WriteString(body)
		}
		exported := exportedNames(scraped.String())
		var missing []string
		for _, ex := range exprs {
			names, err := dashboard.Names(ex.Expr)
			if err != nil {
				t.Fatalf("%s: %s: %v", ex.Panel, ex.Expr, err)
			}
			for _, n := range names {
				if !exported[n] {
					missing = append(missing, fmt.Sprintf("%s (panel %q)", n, ex.Panel))
				}
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not exported: %s", strings.Join(missing, ", "))
		}
		if !strings.Contains(scraped.String(), `coxswain_proxy_requests_total{backend="`+ns+`/v1:80",code_class="2xx",gateway="`+ns+`/gw",route="HTTPRoute/`+ns+`/web"}`) {
			return fmt.Errorf("no requests_total series of the route")
		}
		return nil
	})
}

// exportedNames are the metric names of a Prometheus text exposition.
func exportedNames(text string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.Lines(text) {
		if line == "" || line[0] == '#' {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		names[strings.TrimSpace(name)] = true
	}
	return names
}
