package mirror_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/mirror"
)

// testCA signs the mirror's server certificate and the Gateway's client certificate.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a PEM leaf certificate and key for cn (also its DNS name).
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// newTLSBackend is newBackend over TLS as mirror.internal, requiring a client certificate of ca.
func newTLSBackend(t *testing.T, name string, ca *testCA) *backend {
	certPEM, keyPEM := ca.issue(t, "mirror.internal", x509.ExtKeyUsageServerAuth)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AddCert(ca.cert)
	return serveBackend(t, name, nil, func(srv *httptest.Server) {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
		srv.StartTLS()
	})
}

// TestMirrorToTLSBackend: a mirror whose cluster has upstream TLS (a BackendTLSPolicy) gets its
// copies over that TLS: the cluster's SNI, CA and client certificate, as primary traffic would.
// A CA that did not sign the mirror's certificate fails the copies, never the primary.
func TestMirrorToTLSBackend(t *testing.T) {
	ca := newTestCA(t, "mirror CA")
	clientCert, clientKey := ca.issue(t, "gateway-client", x509.ExtKeyUsageClientAuth)
	secret := &irv1.Secret{Name: "ns/client", CertificatePem: clientCert, PrivateKeyPem: clientKey}
	t.Run("verified, with SNI and the client certificate", func(t *testing.T) {
		primary, m := newBackend(t, "primary", nil), newTLSBackend(t, "mirror", ca)
		h := start(t, primary, []*backend{m}, options{secrets: []*irv1.Secret{secret},
			tls: &irv1.UpstreamTLS{ServerName: "mirror.internal", CaPem: ca.pem, ClientCertificate: "ns/client"}})
		if status, body := h.do(t, http.MethodPost, "/tls", nil, nil); status != http.StatusOK || body != "primary" {
			t.Fatalf("client got %d %q", status, body)
		}
		s := m.next(t)
		if s.URI != "/tls" || s.Header.Get("X-Seen-SNI") != "mirror.internal" || s.Header.Get("X-Seen-Client") != "gateway-client" {
			t.Errorf("mirror got %s SNI %q client %q", s.URI, s.Header.Get("X-Seen-SNI"), s.Header.Get("X-Seen-Client"))
		}
		h.await(t, 0, mirror.ResultSent, 1)
	})
	t.Run("an untrusted certificate fails the copy", func(t *testing.T) {
		primary, m := newBackend(t, "primary", nil), newTLSBackend(t, "mirror", ca)
		other := newTestCA(t, "other CA")
		h := start(t, primary, []*backend{m}, options{secrets: []*irv1.Secret{secret},
			tls: &irv1.UpstreamTLS{ServerName: "mirror.internal", CaPem: other.pem, ClientCertificate: "ns/client"}})
		if status, body := h.do(t, http.MethodGet, "/", nil, nil); status != http.StatusOK || body != "primary" {
			t.Fatalf("client got %d %q", status, body)
		}
		h.await(t, 0, mirror.ResultFailed, 1)
		m.none(t)
	})
}
