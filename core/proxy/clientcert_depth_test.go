package proxy_test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// intermediate issues a CA certificate signed by ca.
func (ca *testCA) intermediate(t testing.TB, cn string) *testCA {
	t.Helper()
	sub := newTestCA(t, cn) // for its key; the certificate is re-signed by ca below
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &sub.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: sub.key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// certEcho answers with the ssl-client-cert headers it received.
func certEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Got-Cert", r.Header.Get("Ssl-Client-Cert"))
	w.Header().Set("X-Got-Cert-Count", strconv.Itoa(len(r.Header.Values("Ssl-Client-Cert"))))
	_, _ = w.Write([]byte("ok"))
}

// TestClientCertificateDepthAndHeader: verify_depth 1 takes a chain with one intermediate and
// refuses one with two (in the handshake when a certificate is required; as unverified, so
// without the header, in fallback mode); certificate_header carries the verified leaf as
// URL-encoded PEM and never the client's own copy.
func TestClientCertificateDepthAndHeader(t *testing.T) {
	be := newBackend(t, "ok", certEcho)
	root := newTestCA(t, "root")
	int1 := root.intermediate(t, "intermediate 1")
	int2 := int1.intermediate(t, "intermediate 2")
	near, far := int1.client(t, "near"), int2.client(t, "far")
	near.Certificate = append(near.Certificate, int1.cert.Raw)
	far.Certificate = append(far.Certificate, int2.cert.Raw, int1.cert.Raw)
	secrets := []*irv1.Secret{secret(t, "ns/wild", "wild", "*.example.com")}
	to := backend("ok", 1)
	srv := func(host string, mode irv1.ClientValidation_Mode) *irv1.Server {
		s := tlsServer(host, []string{"ns/wild"}, vhost(host, route("r/"+host, "/", to)))
		s.Tls.ClientValidation = &irv1.ClientValidation{CaPem: root.pem, Mode: mode, VerifyDepth: 1, CertificateHeader: "ssl-client-cert"}
		return s
	}
	ln := httpsListener(0,
		srv("strict.example.com", irv1.ClientValidation_ALLOW_VALID_ONLY),
		srv("fallback.example.com", irv1.ClientValidation_ALLOW_INSECURE_FALLBACK))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{ln}, []*irv1.Cluster{cluster("ok", be)}, secrets...))
	addr := addrOf(t, p, ln.Name)

	escaped := func(c tls.Certificate) string {
		p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]})
		return strings.ReplaceAll(url.QueryEscape(string(p)), "+", "%20")
	}
	cases := []struct {
		name, host string
		cert       tls.Certificate
		fails      bool
		header     string
	}{
		{"strict, one intermediate", "strict.example.com", near, false, escaped(near)},
		{"strict, two intermediates", "strict.example.com", far, true, ""},
		{"fallback, one intermediate", "fallback.example.com", near, false, escaped(near)},
		{"fallback, two intermediates", "fallback.example.com", far, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(addr, func(tr *http.Transport) {
				tr.TLSClientConfig.ServerName = tc.host
				tr.TLSClientConfig.Certificates = []tls.Certificate{tc.cert}
			})
			for range 2 { // the second on the same connection (fallback mode caches per connection)
				r := c.get(hostURL("https", tc.host, "/"), "ssl-client-cert", "forged")
				if tc.fails {
					if r.err == nil {
						t.Fatalf("request succeeded (status %d), want a failed handshake", r.status)
					}
					return
				}
				must(t, r)
				if r.status != http.StatusOK {
					t.Fatalf("status %d (%s)", r.status, r.body)
				}
				want := "0"
				if tc.header != "" {
					want = "1"
				}
				if got := r.header.Get("X-Got-Cert"); got != tc.header || r.header.Get("X-Got-Cert-Count") != want {
					t.Fatalf("upstream got %s ssl-client-cert %q, want %q", r.header.Get("X-Got-Cert-Count"), got, tc.header)
				}
			}
			if tc.header != "" && !strings.HasPrefix(tc.header, "-----BEGIN%20CERTIFICATE-----%0A") {
				t.Fatalf("header %q is not escaped PEM", tc.header)
			}
		})
	}
}
