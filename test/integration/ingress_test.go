package integration

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

func ingressBackend(svc string) networkingv1.IngressBackend {
	return networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}
}

func ingressRule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

func ingressPath(path string, pt networkingv1.PathType, svc string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: ptr.To(pt), Backend: ingressBackend(svc)}
}

func createIngress(t *testing.T, e *env.Env, ing *networkingv1.Ingress) {
	t.Helper()
	if _, err := e.Kube.NetworkingV1().Ingresses(ing.Namespace).Create(ctxFor(t), ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ingressEvent waits for a Warning Event on Ingress ns/name with reason whose message holds sub.
func ingressEvent(t *testing.T, e *env.Env, ns, name, reason, sub string) {
	t.Helper()
	eventually(t, fmt.Sprintf("Event %s on Ingress %s/%s with %q", reason, ns, name, sub), func() error {
		evs, err := e.Kube.CoreV1().Events(ns).List(ctxFor(t), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.Type == corev1.EventTypeWarning && ev.Reason == reason && strings.Contains(ev.Message, sub) {
				return nil
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return fmt.Errorf("events %q", seen)
	})
}

// TestIngress runs the controller against a real API server with Ingresses of our class (by
// spec.ingressClassName and by the default class), one of another controller's class, real
// backends and requests: Exact, Prefix element-wise, the one-label wildcard, defaultBackend, TLS by SNI,
// status.loadBalancer, Events for an invalid annotation and a resource backend, and the
// precedence of an HTTPRoute on a shared host.
func TestIngress(t *testing.T) {
	e := env.Start(t)
	const port, tlsPort = 18780, 18743
	ns := namespace(t, e, "ingress", nil)
	for i, n := range []string{"api", "exact", "wild", "def", "route", "other"} {
		addr := fmt.Sprintf("10.99.180.%d", i+1)
		startBackend(t, n, addr+":8080")
		createService(t, e, ns, n, addr)
	}
	class := "coxswain-" + ns
	for _, c := range []*networkingv1.IngressClass{
		{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: networkingv1.IngressClassSpec{Controller: "coxswain-labs.dev/ingress-controller"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nginx-" + ns}, Spec: networkingv1.IngressClassSpec{Controller: "k8s.io/ingress-nginx"}},
	} {
		if _, err := e.Kube.NetworkingV1().IngressClasses().Create(ctxFor(t), c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createIngress(t, e, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Annotations: map[string]string{
			"ingress.coxswain-labs.dev/read-timeout": "banana",
		}},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(class),
			DefaultBackend:   ptr.To(ingressBackend("def")),
			Rules: []networkingv1.IngressRule{
				ingressRule("app.example", ingressPath("/api", networkingv1.PathTypePrefix, "api"), ingressPath("/exact", networkingv1.PathTypeExact, "exact")),
				ingressRule("*.wild.example", ingressPath("/", networkingv1.PathTypePrefix, "wild")),
			},
		},
	})
	createIngress(t, e, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad", Annotations: map[string]string{"kubernetes.io/ingress.class": class}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{ingressRule("bad.example", networkingv1.HTTPIngressPath{
			Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
			Backend: networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{APIGroup: ptr.To("example.com"), Kind: "Bucket", Name: "b"}},
		})}},
	})
	createIngress(t, e, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "theirs"},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx-" + ns),
			Rules: []networkingv1.IngressRule{ingressRule("theirs.example", ingressPath("/", networkingv1.PathTypePrefix, "other"))}},
	})
	// TLS by SNI from the Ingress's Secret (the demo certificate, valid for *.example.com).
	secretYAML, err := os.ReadFile(filepath.Join("..", "..", "examples", "ingress", "tls-secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var secret corev1.Secret
	if err := yaml.UnmarshalStrict(secretYAML, &secret); err != nil {
		t.Fatal(err)
	}
	secret.Namespace = ns
	if _, err := e.Kube.CoreV1().Secrets(ns).Create(ctxFor(t), &secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createIngress(t, e, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secure"},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(class),
			TLS:   []networkingv1.IngressTLS{{Hosts: []string{"tls.example.com"}, SecretName: secret.Name}},
			Rules: []networkingv1.IngressRule{ingressRule("tls.example.com", ingressPath("/", networkingv1.PathTypePrefix, "exact"))}},
	})
	startController(t, e, controllerOpts{kindSettings: map[string]string{
		"ingress.http-address": fmt.Sprintf("0.0.0.0:%d", port), "ingress.https-address": fmt.Sprintf("0.0.0.0:%d", tlsPort),
	}})

	served(t, port, "app.example", "/api", 200, "api")
	served(t, port, "app.example", "/api/v1", 200, "api")
	served(t, port, "app.example", "/apiv1", 200, "def") // element-wise: not under /api
	served(t, port, "app.example", "/exact", 200, "exact")
	served(t, port, "app.example", "/exact/x", 200, "def")
	served(t, port, "a.wild.example", "/x", 200, "wild")
	served(t, port, "a.b.wild.example", "/x", 200, "def") // one label only
	served(t, port, "theirs.example", "/", 200, "def")    // another controller's class
	served(t, port, "bad.example", "/", 200, "def")       // its only rule is dropped

	demoHTTPSServed(t, tlsPort, "tls.example.com", "exact")

	eventually(t, "Ingress app status.loadBalancer", func() error {
		ing, err := e.Kube.NetworkingV1().Ingresses(ns).Get(ctxFor(t), "app", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) != 1 || lb[0].IP != gatewayIP {
			return fmt.Errorf("status.loadBalancer.ingress %+v", lb)
		}
		return nil
	})
	theirs, err := e.Kube.NetworkingV1().Ingresses(ns).Get(ctxFor(t), "theirs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(theirs.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("another class's Ingress got status %+v", theirs.Status.LoadBalancer.Ingress)
	}
	ingressEvent(t, e, ns, "app", "InvalidIngress", "ingress.coxswain-labs.dev/read-timeout")
	ingressEvent(t, e, ns, "bad", "InvalidKind", "resource backends")

	// An HTTPRoute for app.example on a Gateway sharing the port: Gateway API takes the host,
	// the Ingress is told, and its other hosts keep serving.
	createClass(t, e, "gw-"+ns, "")
	createGateway(t, e, ns, "gw", "gw-"+ns, httpListener("http", port))
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"app.example"}, prefixRule("/", backendRef("route", 1))))
	served(t, port, "app.example", "/api", 200, "route")
	served(t, port, "a.wild.example", "/x", 200, "wild")
	ingressEvent(t, e, ns, "app", "InvalidIngress", "Gateway API routes take precedence")
}

// demoHTTPSServed waits until https://gatewayIP:port/ with SNI and Host host is answered by backend,
// with a certificate that verifies for host against the demo CA.
func demoHTTPSServed(t *testing.T, port int, host, backend string) {
	t.Helper()
	ca, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", "demo-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12}}}
	eventually(t, fmt.Sprintf("https %s answered by %s", host, backend), func() error {
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
		if got := res.Header.Get("X-Backend"); got != backend {
			return fmt.Errorf("status %d from %q", res.StatusCode, got)
		}
		return nil
	})
}
