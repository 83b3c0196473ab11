package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// demoPKI is a CA and the certificates it signs for the backend TLS test.
type demoPKI struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newDemoPKI(t *testing.T) *demoPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "integration CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &demoPKI{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *demoPKI) issue(t *testing.T, cn string, usage x509.ExtKeyUsage, dns ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// startMTLSBackend serves HTTPS on addr (in the test network namespace) with a certificate of
// ca for dns, requiring a client certificate of ca; X-Backend is name, X-Client the client's CN.
func startMTLSBackend(t *testing.T, name, addr string, ca *demoPKI, dns ...string) {
	t.Helper()
	c, k := ca.issue(t, name, x509.ExtKeyUsageServerAuth, dns...)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert})
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Client", r.TLS.PeerCertificates[0].Subject.CommonName)
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// TestBackendTLSPolicy: against a real API server, a BackendTLSPolicy with its CA in a ConfigMap
// makes the proxy reach the backend over TLS, presenting the Gateway's client certificate; the
// policy's status names the Gateway; a wrong SAN is refused; and a ConfigMap edit that breaks the
// CA turns the policy NoValidCACertificate and the traffic into 502s, until it is fixed.
func TestBackendTLSPolicy(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "btls", nil)
	const port = 19210
	ca := newDemoPKI(t)
	startMTLSBackend(t, "secure", "10.99.81.1:8080", ca, "secure.internal")
	createClass(t, e, "btls", "")
	clientCert, clientKey := ca.issue(t, "gateway-client", x509.ExtKeyUsageClientAuth)
	if _, err := e.Kube.CoreV1().Secrets(ns).Create(ctxFor(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.crt": clientCert, "tls.key": clientKey}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.CoreV1().ConfigMaps(ns).Create(ctxFor(t), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"},
		Data: map[string]string{"ca.crt": string(ca.pem)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"}, Spec: gwapiv1.GatewaySpec{
		GatewayClassName: "btls", Listeners: []gwapiv1.Listener{httpListener("http", port)},
		TLS: &gwapiv1.GatewayTLSConfig{Backend: &gwapiv1.GatewayBackendTLS{ClientCertificateRef: &gwapiv1.SecretObjectReference{Name: "client"}}},
	}}
	if _, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createService(t, e, ns, "secure", "10.99.81.1")
	createService(t, e, ns, "wrong-san", "10.99.81.1")
	createService(t, e, ns, "bundled", "10.99.81.1")
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil,
		prefixRule("/secure", backendRef("secure", 1)), prefixRule("/wrong-san", backendRef("wrong-san", 1)),
		prefixRule("/bundled", backendRef("bundled", 1))))
	// The CA of Service bundled comes from a ClusterTrustBundle (cluster-scoped, so named after the
	// test's namespace).
	bundle := "coxswain-it-" + ns
	if _, err := e.Kube.CertificatesV1().ClusterTrustBundles().Create(ctxFor(t), &certificatesv1.ClusterTrustBundle{
		ObjectMeta: metav1.ObjectMeta{Name: bundle}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(ca.pem)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a ClusterTrustBundle (certificates.k8s.io/v1): %v", err)
	}
	t.Cleanup(func() {
		_ = e.Kube.CertificatesV1().ClusterTrustBundles().Delete(ctxFor(t), bundle, metav1.DeleteOptions{})
	})
	caRefs := map[string]gwapiv1.LocalObjectReference{"bundled": {Group: certificatesv1.GroupName, Kind: "ClusterTrustBundle", Name: gwapiv1.ObjectName(bundle)}}
	policy := func(name, svc string, sans ...gwapiv1.SubjectAltName) {
		ref, ok := caRefs[svc]
		if !ok {
			ref = gwapiv1.LocalObjectReference{Kind: "ConfigMap", Name: "ca"}
		}
		p := &gwapiv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwapiv1.BackendTLSPolicySpec{
			TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{
				Kind: "Service", Name: gwapiv1.ObjectName(svc)}, SectionName: ptr.To(gwapiv1.SectionName("http"))}},
			Validation: gwapiv1.BackendTLSPolicyValidation{Hostname: "secure.internal", SubjectAltNames: sans,
				CACertificateRefs: []gwapiv1.LocalObjectReference{ref}},
		}}
		if _, err := e.Gateway.GatewayV1().BackendTLSPolicies(ns).Create(ctxFor(t), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	policy("secure", "secure")
	policy("wrong-san", "wrong-san", gwapiv1.SubjectAltName{Type: gwapiv1.HostnameSubjectAltNameType, Hostname: "other.internal"})
	policy("bundled", "bundled")

	t.Run("TLS with the Gateway's client certificate", func(t *testing.T) {
		eventually(t, "GET /secure over TLS", func() error {
			r, err := get(port, "any", "/secure")
			if err != nil {
				return err
			}
			if r.status != 200 || r.backend != "secure" || r.header.Get("X-Client") != "gateway-client" {
				return fmt.Errorf("got %d from %q (client %q): %s", r.status, r.backend, r.header.Get("X-Client"), r.body)
			}
			return nil
		})
		waitTLSPolicy(t, e, ns, "secure", "Accepted", "True", "Accepted")
		waitTLSPolicy(t, e, ns, "secure", "ResolvedRefs", "True", "ResolvedRefs")
	})
	t.Run("a SAN the certificate lacks is refused", func(t *testing.T) {
		served(t, port, "any", "/wrong-san", 502, "")
		waitTLSPolicy(t, e, ns, "wrong-san", "Accepted", "True", "Accepted")
	})
	t.Run("a ClusterTrustBundle CA, and its deletion", func(t *testing.T) {
		served(t, port, "any", "/bundled", 200, "secure")
		waitTLSPolicy(t, e, ns, "bundled", "ResolvedRefs", "True", "ResolvedRefs")
		if err := e.Kube.CertificatesV1().ClusterTrustBundles().Delete(ctxFor(t), bundle, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitTLSPolicy(t, e, ns, "bundled", "Accepted", "False", "NoValidCACertificate")
		waitTLSPolicy(t, e, ns, "bundled", "ResolvedRefs", "False", "InvalidCACertificateRef")
		served(t, port, "any", "/bundled", 502, "")
	})
	t.Run("a ConfigMap edit is followed", func(t *testing.T) {
		setCA := func(data string) {
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cm, err := e.Kube.CoreV1().ConfigMaps(ns).Get(ctxFor(t), "ca", metav1.GetOptions{})
				if err != nil {
					return err
				}
				cm.Data["ca.crt"] = data
				_, err = e.Kube.CoreV1().ConfigMaps(ns).Update(ctxFor(t), cm, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		setCA("not a certificate")
		waitTLSPolicy(t, e, ns, "secure", "Accepted", "False", "NoValidCACertificate")
		waitTLSPolicy(t, e, ns, "secure", "ResolvedRefs", "False", "InvalidCACertificateRef")
		served(t, port, "any", "/secure", 502, "")
		setCA(string(ca.pem))
		waitTLSPolicy(t, e, ns, "secure", "Accepted", "True", "Accepted")
		served(t, port, "any", "/secure", 200, "secure")
	})
}

// waitTLSPolicy waits until BackendTLSPolicy ns/name has, for Gateway ns/gw and at its current
// generation, condition typ with status and reason.
func waitTLSPolicy(t *testing.T, e *env.Env, ns, name, typ, status, reason string) {
	t.Helper()
	eventually(t, fmt.Sprintf("BackendTLSPolicy %s %s=%s %s", name, typ, status, reason), func() error {
		p, err := e.Gateway.GatewayV1().BackendTLSPolicies(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, a := range p.Status.Ancestors {
			if a.AncestorRef.Name != "gw" || string(a.ControllerName) != translatorController {
				continue
			}
			for _, c := range a.Conditions {
				if c.Type == typ && string(c.Status) == status && c.Reason == reason && c.ObservedGeneration == p.Generation {
					return nil
				}
			}
		}
		return fmt.Errorf("ancestors %+v", p.Status.Ancestors)
	})
}
