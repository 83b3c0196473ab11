package proxy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// client issues a client certificate for subject (organization "acme", common name cn).
func (ca *testCA) client(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: []string{"acme"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func validating(s *irv1.Server, ca []byte, mode irv1.ClientValidation_Mode, header string) *irv1.Server {
	s.Tls.ClientValidation = &irv1.ClientValidation{CaPem: ca, Mode: mode, SubjectHeader: header}
	return s
}

// subjectEcho answers with the subject header it received, so tests see what reached the upstream.
func subjectEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Got-Subject", r.Header.Get("X-Client-Subject"))
	w.Header().Set("X-Got-Subject-Count", string(rune('0'+len(r.Header.Values("X-Client-Subject")))))
	_, _ = w.Write([]byte("ok"))
}

// TestClientCertificateValidation: real TLS clients with a certificate of the bundle's CA, of
// another CA, and none, against a Server that requires one (AllowValidOnly), one that lets them
// through (AllowInsecureFallback) and one that asks for nothing; over HTTP/1.1 and HTTP/2. The
// subject header reaches the upstream only from a verified certificate and never from the client.
func TestClientCertificateValidation(t *testing.T) {
	be := newBackend(t, "ok", subjectEcho)
	good, other := newTestCA(t, "good CA"), newTestCA(t, "other CA")
	goodCert, otherCert := good.client(t, "alice"), other.client(t, "mallory")
	secrets := []*irv1.Secret{secret(t, "ns/wild", "wild", "*.example.com")}
	to := backend("ok", 1)
	srv := func(host string) *irv1.Server {
		return tlsServer(host, []string{"ns/wild"}, vhost(host, route("r/"+host, "/", to)))
	}
	ln := httpsListener(0,
		validating(srv("strict.example.com"), good.pem, irv1.ClientValidation_ALLOW_VALID_ONLY, "X-Client-Subject"),
		validating(srv("fallback.example.com"), good.pem, irv1.ClientValidation_ALLOW_INSECURE_FALLBACK, "x-client-subject"),
		srv("open.example.com"),
	)
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{ln}, []*irv1.Cluster{cluster("ok", be)}, secrets...))
	addr := addrOf(t, p, ln.Name)

	const alice = "CN=alice,O=acme"
	cases := []struct {
		name, host string
		cert       *tls.Certificate
		fails      bool   // the handshake or request fails
		subject    string // what reaches the upstream in X-Client-Subject
	}{
		{"strict, certificate of the CA", "strict.example.com", &goodCert, false, alice},
		{"strict, certificate of another CA", "strict.example.com", &otherCert, true, ""},
		{"strict, no certificate", "strict.example.com", nil, true, ""},
		{"fallback, certificate of the CA", "fallback.example.com", &goodCert, false, alice},
		{"fallback, certificate of another CA", "fallback.example.com", &otherCert, false, ""},
		{"fallback, no certificate", "fallback.example.com", nil, false, ""},
		{"no validation, certificate", "open.example.com", &goodCert, false, "forged"},
	}
	for _, h2 := range []bool{false, true} {
		for _, tc := range cases {
			name := map[bool]string{false: "HTTP/1.1/", true: "HTTP/2/"}[h2] + tc.name
			t.Run(name, func(t *testing.T) {
				c := newClient(addr, func(tr *http.Transport) {
					tr.ForceAttemptHTTP2 = h2
					tr.TLSClientConfig.ServerName = tc.host
					if tc.cert != nil {
						tr.TLSClientConfig.Certificates = []tls.Certificate{*tc.cert}
					}
				})
				r := c.get(hostURL("https", tc.host, "/"), "X-Client-Subject", "forged")
				if r.err == nil {
					// Again on the same connection: what the first request established (in
					// fallback mode, a cached verification) holds for the next.
					r = c.get(hostURL("https", tc.host, "/"), "X-Client-Subject", "forged")
					if n := c.dials.Load(); n != 1 {
						t.Fatalf("%d connections for two requests", n)
					}
				}
				if tc.fails {
					if r.err == nil {
						t.Fatalf("request succeeded (status %d), want a failed handshake", r.status)
					}
					return
				}
				must(t, r)
				if r.status != http.StatusOK {
					t.Fatalf("status %d, want 200 (%s)", r.status, r.body)
				}
				if got := r.header.Get("X-Got-Subject"); got != tc.subject {
					t.Fatalf("upstream got subject %q, want %q", got, tc.subject)
				}
				if tc.subject != "" && r.header.Get("X-Got-Subject-Count") != "1" {
					t.Fatalf("upstream got %s subject headers, want 1", r.header.Get("X-Got-Subject-Count"))
				}
			})
		}
	}
}

// TestClientCertificateNotBypassed: a connection set up for a Server that does not require a
// client certificate (another SNI, no SNI, or before the Server started requiring one) cannot
// carry requests for one that does, and a session resumed from another Server does not skip the
// certificate check of its bundle.
func TestClientCertificateNotBypassed(t *testing.T) {
	be := newBackend(t, "ok", subjectEcho)
	ca, ca2 := newTestCA(t, "CA"), newTestCA(t, "CA2")
	cert := ca.client(t, "alice")
	secrets := []*irv1.Secret{secret(t, "ns/wild", "wild", "*.example.com")}
	to := backend("ok", 1)
	srv := func(host string) *irv1.Server {
		return tlsServer(host, []string{"ns/wild"}, vhost(host, route("r/"+host, "/", to)))
	}
	listener := func(strictOpen bool) *irv1.Listener {
		open := srv("open.example.com")
		if strictOpen {
			open = validating(open, ca.pem, irv1.ClientValidation_ALLOW_VALID_ONLY, "")
		}
		// open first: a handshake without SNI gets its certificate.
		return httpsListener(0, open,
			validating(srv("strict.example.com"), ca.pem, irv1.ClientValidation_ALLOW_VALID_ONLY, ""),
			validating(srv("fallback.example.com"), ca.pem, irv1.ClientValidation_ALLOW_INSECURE_FALLBACK, ""),
			validating(srv("other.example.com"), ca2.pem, irv1.ClientValidation_ALLOW_VALID_ONLY, ""))
	}
	ln := listener(false)
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{ln}, []*irv1.Cluster{cluster("ok", be)}, secrets...))
	addr := addrOf(t, p, ln.Name)

	for _, h2 := range []bool{false, true} {
		for _, sni := range []string{"open.example.com", "fallback.example.com", ""} {
			t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]+"/SNI "+sni, func(t *testing.T) {
				c := newClient(addr, func(tr *http.Transport) {
					tr.ForceAttemptHTTP2 = h2
					tr.TLSClientConfig.ServerName = sni
				})
				r := must(t, c.get(hostURL("https", "127.0.0.1", "/"), "Host", "strict.example.com"))
				if r.status != http.StatusMisdirectedRequest {
					t.Fatalf("Host strict.example.com on a connection for SNI %q: status %d, want 421", sni, r.status)
				}
			})
		}
	}

	t.Run("session verified by another server's CA resumed", func(t *testing.T) {
		// The listener's Servers share ticket keys: crypto/tls must verify a resumed session's
		// chain against the resuming Server's bundle, not the issuing one's.
		cache := &oneSession{}
		dial := func(sni string, certs ...tls.Certificate) (*tls.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{
				ServerName: sni, InsecureSkipVerify: true, ClientSessionCache: cache,
				NextProtos: []string{"http/1.1"}, Certificates: certs})
		}
		c, err := dial("strict.example.com", cert)
		if err != nil {
			t.Fatal(err)
		}
		// A TLS 1.3 ticket arrives after the handshake: read until the server answers.
		roundTrip(t, c, "strict.example.com")
		_ = c.Close()
		if cache.s == nil {
			t.Fatal("the strict server issued no session ticket")
		}
		c, err = dial("strict.example.com")
		if err != nil {
			t.Fatal(err)
		}
		if !c.ConnectionState().DidResume {
			t.Fatal("the strict server's own session did not resume: the test cannot tell resumption from a refused ticket")
		}
		roundTrip(t, c, "strict.example.com")
		_ = c.Close()
		c, err = dial("other.example.com")
		if err == nil {
			_, err = c.Write([]byte("GET / HTTP/1.1\r\nHost: other.example.com\r\n\r\n"))
			if err == nil {
				// TLS 1.3: the client learns of the refused handshake with its first read.
				_, err = c.Read(make([]byte, 1))
			}
			_ = c.Close()
		}
		if err == nil {
			t.Fatal("a session verified against another CA reached other.example.com without a certificate")
		}
	})

	t.Run("a connection from before the server required certificates", func(t *testing.T) {
		c := newClient(addr, func(tr *http.Transport) {
			tr.TLSClientConfig.ServerName = "open.example.com"
			tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
		})
		if r := must(t, c.get(hostURL("https", "open.example.com", "/"))); r.status != http.StatusOK {
			t.Fatalf("status %d before the change", r.status)
		}
		apply(t, p, snapshot(t, []*irv1.Listener{listener(true)}, []*irv1.Cluster{cluster("ok", be)}, secrets...))
		r := must(t, c.get(hostURL("https", "open.example.com", "/")))
		if r.status != http.StatusMisdirectedRequest {
			t.Fatalf("old connection: status %d, want 421", r.status)
		}
		if c.dials.Load() != 1 {
			t.Fatalf("%d connections, want the old one reused", c.dials.Load())
		}
		// A new connection presents the certificate and gets through.
		c.CloseIdleConnections()
		if r := must(t, c.get(hostURL("https", "open.example.com", "/"))); r.status != http.StatusOK {
			t.Fatalf("new connection: status %d, want 200", r.status)
		}
	})
}

// oneSession is a client session cache that offers its one session to every server name.
type oneSession struct{ s *tls.ClientSessionState }

func (c *oneSession) Get(string) (*tls.ClientSessionState, bool) { return c.s, c.s != nil }
func (c *oneSession) Put(_ string, s *tls.ClientSessionState) {
	if s != nil {
		c.s = s
	}
}

// roundTrip sends one HTTP/1.1 request on c and reads the start of the answer.
func roundTrip(t *testing.T, c *tls.Conn, host string) {
	t.Helper()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 12)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != "HTTP/1.1 200" {
		t.Fatalf("answer %q", buf)
	}
}

// BenchmarkHTTPSClientCertificate: one keep-alive HTTP/1.1 request per op over TLS, without
// client validation and with it (the per-request check, and the subject header; in fallback mode
// the chain is verified per request when the header is on), then new connections per op with a
// client certificate (the handshake's verification).
func BenchmarkHTTPSClientCertificate(b *testing.B) {
	be := newBackend(b, "be", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	ca := newTestCA(b, "CA")
	cert := ca.client(b, "alice")
	cases := []struct {
		name      string
		cv        *irv1.ClientValidation
		keepAlive bool
	}{
		{"keep-alive/no validation", nil, true},
		{"keep-alive/AllowValidOnly+header", &irv1.ClientValidation{CaPem: ca.pem, SubjectHeader: "X-Client-Subject"}, true},
		{"keep-alive/AllowInsecureFallback+header", &irv1.ClientValidation{CaPem: ca.pem, SubjectHeader: "X-Client-Subject",
			Mode: irv1.ClientValidation_ALLOW_INSECURE_FALLBACK}, true},
		{"new connection/no validation", nil, false},
		{"new connection/AllowValidOnly", &irv1.ClientValidation{CaPem: ca.pem}, false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			s := tlsServer("", []string{"ns/c"}, vhost("", route("r", "/", backend("be", 1))))
			s.Tls.ClientValidation = tc.cv
			l := httpsListener(0, s)
			p := newProxy(b)
			apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cluster("be", be)}, secret(b, "ns/c", "c", "example.com")))
			c := newClient(addrOf(b, p, l.Name), func(tr *http.Transport) {
				tr.DisableKeepAlives = !tc.keepAlive
				tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
				tr.TLSClientConfig.ServerName = "example.com"
			})
			url := hostURL("https", "example.com", "/bench")
			b.ResetTimer()
			for b.Loop() {
				if r := c.get(url); r.err != nil || r.status != 200 {
					b.Fatalf("%d %v", r.status, r.err)
				}
			}
		})
	}
}
