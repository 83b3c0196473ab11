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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestIngressClusterAnnotations runs the cluster-relevant annotations of this build against a
// real API server: auth-tls-secret (the CA from a Secret the controller watches; a handshake with
// and without a client certificate; 503 over HTTP; an Event when the Secret is missing),
// trust-forwarded-for with an IpAccessControl object, and status.loadBalancer from the proxies'
// Service (--ingress-status-service), which wins over the HTTP listener's address.
func TestIngressClusterAnnotations(t *testing.T) {
	e := env.Start(t)
	const port, tlsPort = 18781, 18744
	ns := namespace(t, e, "ingann", nil)
	startBackend(t, "api", "10.99.182.1:8080")
	createService(t, e, ns, "api", "10.99.182.1")
	class := "coxswain-" + ns
	if _, err := e.Kube.NetworkingV1().IngressClasses().Create(ctxFor(t), &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: networkingv1.IngressClassSpec{Controller: "coxswain-labs.dev/ingress-controller"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The proxies' Service, with a load-balancer address as a cloud controller would write it.
	svc, err := e.Kube.CoreV1().Services(ns).Create(ctxFor(t), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "proxies"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.50"}, {Hostname: "lb.example.net"}}
	if _, err := e.Kube.CoreV1().Services(ns).UpdateStatus(ctxFor(t), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := coxswainObject(t, e, ipAccessGVR, "IpAccessControl", ns, "partners", map[string]any{"allow": []any{"203.0.113.0/24"}}); err != nil {
		t.Fatal(err)
	}
	// The example's Secret: the demo serving certificate with the demo clients CA in ca.crt.
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "ingress", "client-tls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var secret corev1.Secret
	if err := yaml.Unmarshal([]byte(strings.Split(string(b), "\n---\n")[0]), &secret); err != nil {
		t.Fatal(err)
	}
	secret.Namespace = ns
	if _, err := e.Kube.CoreV1().Secrets(ns).Create(ctxFor(t), &secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rule := func(host string) []networkingv1.IngressRule {
		return []networkingv1.IngressRule{ingressRule(host, ingressPath("/", networkingv1.PathTypePrefix, "api"))}
	}
	createIngress(t, e, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mtls", Annotations: map[string]string{"ingress.coxswain-labs.dev/auth-tls-secret": secret.Name}},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(class), Rules: rule("mtls.example.com"),
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"mtls.example.com"}, SecretName: secret.Name}}},
	})
	createIngress(t, e, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone", Annotations: map[string]string{"ingress.coxswain-labs.dev/auth-tls-secret": "no-such-secret"}},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(class), Rules: rule("gone.example.com"),
			TLS: []networkingv1.IngressTLS{{Hosts: []string{"gone.example.com"}, SecretName: secret.Name}}},
	})
	createIngress(t, e, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fwd", Annotations: map[string]string{
			"ingress.coxswain-labs.dev/trust-forwarded-for": "true", "ingress.coxswain-labs.dev/ip-access-control": "partners"}},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To(class), Rules: rule("fwd.example")},
	})
	startController(t, e, controllerOpts{noAddress: true, ingressStatusService: types.NamespacedName{Namespace: ns, Name: "proxies"},
		kindSettings: map[string]string{
			"ingress.http-address": fmt.Sprintf("%s:%d", gatewayIP, port), "ingress.https-address": fmt.Sprintf("%s:%d", gatewayIP, tlsPort),
		}})

	// trust-forwarded-for: the client IpAccessControl judges is the header's.
	xff := func(v string) error {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d/", gatewayIP, port), nil)
		req.Host = "fwd.example"
		if v != "" {
			req.Header.Set("X-Forwarded-For", v)
		}
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK && v != "" || res.StatusCode != http.StatusForbidden && v == "" {
			return fmt.Errorf("X-Forwarded-For %q: status %d", v, res.StatusCode)
		}
		return nil
	}
	eventually(t, "trust-forwarded-for", func() error {
		if err := xff("203.0.113.5"); err != nil {
			return err
		}
		return xff("")
	})

	// auth-tls-secret: the handshake asks for a certificate of the clients CA.
	ca, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", "demo-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	mtlsGet := func(cert []tls.Certificate) (int, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "mtls.example.com", Certificates: cert, MinVersion: tls.VersionTLS12}}}
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("https://%s:%d/", gatewayIP, tlsPort), nil)
		req.Host = "mtls.example.com"
		res, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		_ = res.Body.Close()
		return res.StatusCode, nil
	}
	dir := filepath.Join("..", "..", "examples", "mtls", "certs")
	alice, err := tls.LoadX509KeyPair(filepath.Join(dir, "alice.crt"), filepath.Join(dir, "alice.key"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "mTLS with alice's certificate", func() error {
		if code, err := mtlsGet([]tls.Certificate{alice}); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d, %v", code, err)
		}
		return nil
	})
	if code, err := mtlsGet(nil); err == nil {
		t.Errorf("no client certificate: status %d, want a failed handshake", code)
	}
	served(t, port, "mtls.example.com", "/", http.StatusServiceUnavailable, "")
	served(t, port, "gone.example.com", "/", http.StatusServiceUnavailable, "")
	ingressEvent(t, e, ns, "gone", "InvalidIngress", "no-such-secret of auth-tls-secret does not exist")

	// status.loadBalancer: the proxies' Service, not the HTTP listener's address.
	eventually(t, "Ingress status.loadBalancer from the Service", func() error {
		ing, err := e.Kube.NetworkingV1().Ingresses(ns).Get(ctxFor(t), "fwd", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lb := ing.Status.LoadBalancer.Ingress; len(lb) != 2 || lb[0].IP != "192.0.2.50" || lb[1].Hostname != "lb.example.net" {
			return fmt.Errorf("status.loadBalancer.ingress %+v", lb)
		}
		return nil
	})
}
