package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestClientCertificates: an mTLS client with and without a certificate. The Gateway validates
// client certificates on every HTTPS listener against a ConfigMap's ca.crt (AllowValidOnly) and,
// on one port, against a ClusterTrustBundle with AllowInsecureFallback; a ClientTrafficPolicy
// passes the verified subject to the backend in a header. Through the real API server (which
// serves certificates.k8s.io/v1 ClusterTrustBundles without a flag since Kubernetes 1.37), the
// controller's watches and the in-process proxy: real TLS clients, real backend. Rotating the
// ConfigMap's CA takes effect without touching the Gateway.
func TestClientCertificates(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "mtls", nil)
	const strictPort, fallbackPort = 19700, 19701
	startSubjectBackend(t, "mtls", "10.99.121.1:8080")
	createService(t, e, ns, "svc", "10.99.121.1")
	serverCert := tlsSecret(t, e, ns, "server-cert", "*.mtls.example")
	roots := x509.NewCertPool()
	roots.AddCert(serverCert)

	caA, caB := newClientCA(t, "mtls CA A"), newClientCA(t, "mtls CA B")
	aliceA, bobB := caA.issue(t, "alice"), caB.issue(t, "bob")
	cm, err := e.Kube.CoreV1().ConfigMaps(ns).Create(ctxFor(t), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client-ca"}, Data: map[string]string{"ca.crt": string(caA.pem)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle := "coxswain-it-" + ns
	if _, err := e.Kube.CertificatesV1().ClusterTrustBundles().Create(ctxFor(t), &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: bundle}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(caB.pem)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a ClusterTrustBundle (certificates.k8s.io/v1): %v", err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CertificatesV1().ClusterTrustBundles().Delete(ctxFor(t), bundle, metav1.DeleteOptions{})
	})

	createClass(t, e, "mtls", "")
	_, err = e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "mtls",
			Listeners: []gwapiv1.Listener{
				httpsListener("strict", strictPort, "*.mtls.example", certRef("", "server-cert")),
				httpsListener("fallback", fallbackPort, "*.mtls.example", certRef("", "server-cert")),
			},
			TLS: &gwapiv1.GatewayTLSConfig{Frontend: &gwapiv1.FrontendTLSConfig{
				Default: gwapiv1.TLSConfig{Validation: &gwapiv1.FrontendTLSValidation{
					CACertificateRefs: []gwapiv1.ObjectReference{{Kind: "ConfigMap", Name: "client-ca"}}}},
				PerPort: []gwapiv1.TLSPortConfig{{Port: fallbackPort, TLS: gwapiv1.TLSConfig{Validation: &gwapiv1.FrontendTLSValidation{
					Mode:              gwapiv1.AllowInsecureFallback,
					CACertificateRefs: []gwapiv1.ObjectReference{{Group: certificatesv1.GroupName, Kind: "ClusterTrustBundle", Name: gwapiv1.ObjectName(bundle)}}}}}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createCTP(t, e, ns, "subject", map[string]any{
		"targetRefs":        []any{gatewayTarget("gw", "")},
		"clientCertificate": map[string]any{"subjectHeader": "X-Client-Subject"},
	})
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("svc", 1))))
	httpKinds := []string{"GRPCRoute", "HTTPRoute"}
	waitListener(t, e, ns, "gw", "strict", httpKinds, 1, listenerHealthy...)
	waitListener(t, e, ns, "gw", "fallback", httpKinds, 1, listenerHealthy...)
	waitGateway(t, e, ns, "gw", func(g *gwapiv1.Gateway) error {
		for _, c := range g.Status.Conditions {
			if c.Type == string(gwapiv1.GatewayConditionInsecureFrontendValidationMode) && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("no InsecureFrontendValidationMode True: %+v", g.Status.Conditions)
	})

	get := func(port int, cert *tls.Certificate) (string, error) {
		return mtlsGet(port, "app.mtls.example", roots, cert)
	}
	cases := []struct {
		name    string
		port    int
		cert    *tls.Certificate
		refused bool
		subject string
	}{
		{"strict, certificate of the ConfigMap's CA", strictPort, &aliceA, false, "CN=alice,O=coxswain-it"},
		{"strict, no certificate", strictPort, nil, true, ""},
		{"strict, certificate of another CA", strictPort, &bobB, true, ""},
		{"fallback, certificate of the ClusterTrustBundle's CA", fallbackPort, &bobB, false, "CN=bob,O=coxswain-it"},
		{"fallback, no certificate", fallbackPort, nil, false, ""},
		{"fallback, certificate of another CA", fallbackPort, &aliceA, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			eventually(t, tc.name, func() error {
				subject, err := get(tc.port, tc.cert)
				switch {
				case tc.refused && err == nil:
					return fmt.Errorf("served (subject %q), want the handshake refused", subject)
				case tc.refused:
					return nil
				case err != nil:
					return err
				case subject != tc.subject:
					return fmt.Errorf("backend got subject %q, want %q", subject, tc.subject)
				}
				return nil
			})
		})
	}

	t.Run("rotating the ConfigMap's CA", func(t *testing.T) {
		cm.Data["ca.crt"] = string(caB.pem)
		if _, err := e.Kube.CoreV1().ConfigMaps(ns).Update(ctxFor(t), cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "bob accepted on the strict port", func() error {
			s, err := get(strictPort, &bobB)
			if err != nil || s != "CN=bob,O=coxswain-it" {
				return fmt.Errorf("subject %q, err %v", s, err)
			}
			return nil
		})
		if s, err := get(strictPort, &aliceA); err == nil {
			t.Fatalf("alice (the old CA) still served, subject %q", s)
		}
	})

	t.Run("a missing ConfigMap: the listener is not accepted", func(t *testing.T) {
		if err := e.Kube.CoreV1().ConfigMaps(ns).Delete(ctxFor(t), "client-ca", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitListener(t, e, ns, "gw", "strict", httpKinds, 1,
			cond{"Accepted", "False", "NoValidCACertificate"}, cond{"ResolvedRefs", "False", "InvalidCACertificateRef"},
			cond{"Programmed", "False", "Invalid"})
		refused(t, strictPort)
		// The other listener keeps serving.
		if s, err := get(fallbackPort, &bobB); err != nil || s != "CN=bob,O=coxswain-it" {
			t.Fatalf("fallback port: subject %q, err %v", s, err)
		}
	})
}

// startSubjectBackend answers every request with the X-Client-Subject header it received (and
// "-" when there was none), one header line only.
func startSubjectBackend(t testing.TB, name, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values("X-Client-Subject")
		switch len(vals) {
		case 0:
			_, _ = io.WriteString(w, "-")
		case 1:
			_, _ = io.WriteString(w, vals[0])
		default:
			http.Error(w, fmt.Sprintf("%d subject headers", len(vals)), http.StatusBadRequest)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// mtlsGet sends one HTTPS request with SNI and Host host, presenting cert when set and sending a
// forged subject header, and returns the subject the backend got ("" for none).
func mtlsGet(port int, host string, roots *x509.CertPool, cert *tls.Certificate) (string, error) {
	cfg := &tls.Config{ServerName: host, RootCAs: roots}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true,
		DialContext: func(ctx2 context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx2, network, fmt.Sprintf("%s:%d", gatewayIP, port))
		}}}
	req, err := http.NewRequest(http.MethodGet, "https://"+host+"/", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("X-Client-Subject", "CN=forged")
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", res.StatusCode, body)
	}
	if string(body) == "-" {
		return "", nil
	}
	return string(body), nil
}

// clientCA issues client certificates (organization coxswain-it).
type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newClientCA(t testing.TB, cn string) *clientCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &clientCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *clientCA) issue(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:   pkix.Name{CommonName: cn, Organization: []string{"coxswain-it"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
