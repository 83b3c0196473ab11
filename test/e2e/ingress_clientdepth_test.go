package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate and key made for one test (never committed).
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// issue makes a certificate of tmpl signed by parent (self-signed when parent is nil).
func issue(t *testing.T, parent *testCA, tmpl *x509.Certificate) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl.SerialNumber = n
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: c, key: key}
}

func caTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
}

func pemOf(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

// escapedPEM is the certificate of DER der as ssl-client-cert carries it: PEM, every byte but
// letters, digits and "-._~" percent-encoded (nginx's $ssl_client_escaped_cert).
func escapedPEM(der []byte) string {
	p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	var b strings.Builder
	for _, c := range p {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func keyPEM(t *testing.T, k *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// yamlBlock indents s as a YAML block scalar under a key of indent spaces.
func yamlBlock(s string, indent int) string {
	pad := strings.Repeat(" ", indent)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// TestIngressClientTLSDepthAndCertificate: through `coxswain serve -f`, auth-tls-verify-depth: 1
// accepts a client chain with one intermediate and refuses one with two in the handshake (the same
// CA without the annotation accepts both: the refusal is the depth), and
// auth-tls-pass-certificate-to-upstream hands the verified certificate to the backend in
// ssl-client-cert, URL-encoded PEM as ingress-nginx does, replacing any copy the client sent.
func TestIngressClientTLSDepthAndCertificate(t *testing.T) {
	root := issue(t, nil, caTemplate("depth test root"))
	int1 := issue(t, root, caTemplate("depth test intermediate 1"))
	int2 := issue(t, int1, caTemplate("depth test intermediate 2"))
	leaf := func(parent *testCA, cn string) *testCA {
		return issue(t, parent, &x509.Certificate{Subject: pkix.Name{CommonName: cn},
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	}
	near, far := leaf(int1, "near"), leaf(int2, "far") // one intermediate; two
	srv := issue(t, root, &x509.Certificate{Subject: pkix.Name{CommonName: "depth server"},
		DNSNames: []string{"depth.example.test", "nolimit.example.test"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})

	httpPort, httpsPort := freePort(t), freePort(t)
	ports := map[string]int{}
	for i, n := range []string{"api", "exact", "wild", "default"} {
		ports["port: "+strconv.Itoa(9101+i)] = startBackend(t, n).port
	}
	files := exampleFiles(t, "ingress", ports)
	ingress := func(name, ann string) string {
		return fmt.Sprintf(`---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %[1]s
  annotations:
    ingress.coxswain-labs.dev/auth-tls-secret: depth-tls
%[2]s
spec:
  ingressClassName: coxswain
  tls: [{hosts: [%[1]s.example.test], secretName: depth-tls}]
  rules:
  - host: %[1]s.example.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}]}
`, name, ann)
	}
	files["depth.yaml"] = `apiVersion: v1
kind: Secret
metadata: {name: depth-tls}
type: kubernetes.io/tls
stringData:
  tls.crt: |
` + yamlBlock(pemOf(srv.cert), 4) + `
  tls.key: |
` + yamlBlock(keyPEM(t, srv.key), 4) + `
  ca.crt: |
` + yamlBlock(pemOf(root.cert), 4) + "\n" +
		ingress("depth", `    ingress.coxswain-labs.dev/auth-tls-verify-depth: "1"
    ingress.coxswain-labs.dev/auth-tls-pass-certificate-to-upstream: "true"`) +
		ingress("nolimit", "")
	startServe(t, files,
		"--ingress-http-address", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--ingress-https-address", fmt.Sprintf("127.0.0.1:%d", httpsPort))

	roots := x509.NewCertPool()
	roots.AddCert(root.cert)
	// get asks host as the client with chain (leaf first), sending a forged ssl-client-cert.
	get := func(host string, chain ...*testCA) (*echo, error) {
		cert := tls.Certificate{PrivateKey: chain[0].key}
		for _, c := range chain {
			cert.Certificate = append(cert.Certificate, c.cert.Raw)
		}
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots, ServerName: host, Certificates: []tls.Certificate{cert}}}}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/", httpsPort), nil)
		req.Host = host
		req.Header.Set("ssl-client-cert", "forged")
		res, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = res.Body.Close() }()
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("status %d", res.StatusCode)
		}
		var e echo
		if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
			return nil, err
		}
		return &e, nil
	}
	var got *echo
	eventually(t, 10*time.Second, "near on depth.example.test", func() error {
		var err error
		got, err = get("depth.example.test", near, int1)
		return err
	})
	h := got.Headers["Ssl-Client-Cert"]
	if len(h) != 1 {
		t.Fatalf("ssl-client-cert: %q", h)
	}
	if h[0] != escapedPEM(near.cert.Raw) || !strings.HasPrefix(h[0], "-----BEGIN%20CERTIFICATE-----%0A") {
		t.Errorf("ssl-client-cert %q is not near's PEM escaped as nginx does", h[0])
	}
	if _, err := get("depth.example.test", far, int2, int1); err == nil {
		t.Error("a chain of two intermediates passed auth-tls-verify-depth 1")
	}
	// The same CA without the annotation: no limit.
	eventually(t, 10*time.Second, "far on nolimit.example.test", func() error {
		_, err := get("nolimit.example.test", far, int2, int1)
		return err
	})
}
