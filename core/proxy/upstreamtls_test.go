package proxy_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// testCA issues certificates for the upstream TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs a leaf for dns names and URIs with the given usage; it returns the PEM pair.
func (ca *testCA) issue(t testing.TB, cn string, usage x509.ExtKeyUsage, dns []string, uris ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// newTLSBackend serves h over TLS on loopback with a certificate of ca for dns and uris; it
// reports the SNI it was asked for and the client certificate's CN (if any) in X-Got-SNI and
// X-Got-Client. clientCA, when set, makes a client certificate of it mandatory.
func newTLSBackend(t *testing.T, name string, ca *testCA, clientCA *testCA, h2 bool, dns []string, uris ...string) *testBackend {
	t.Helper()
	return newTLSBackendWith(t, name, ca, clientCA, h2, dns, uris, nil)
}

// newTLSBackendWith is newTLSBackend with configure run on the server before it starts.
func newTLSBackendWith(t *testing.T, name string, ca *testCA, clientCA *testCA, h2 bool, dns, uris []string, configure func(*http.Server)) *testBackend {
	t.Helper()
	c, k := ca.issue(t, name, x509.ExtKeyUsageServerAuth, dns, uris...)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	inner := echo(name)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "websocket" {
			tunnel(t, w)
			return
		}
		if r.Method == http.MethodPost { // echoes the body back, once it has all of it
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(b)
			return
		}
		w.Header().Set("X-Got-SNI", r.TLS.ServerName)
		if len(r.TLS.PeerCertificates) > 0 {
			w.Header().Set("X-Got-Client", r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		inner(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		srv.TLS.ClientCAs, srv.TLS.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests expect
	srv.EnableHTTP2 = h2
	if configure != nil {
		configure(srv.Config)
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &testBackend{name: name, srv: srv, port: portOf(t, srv.Listener.Addr().String())}
}

func tlsCluster(name string, b *testBackend, ut *irv1.UpstreamTLS) *irv1.Cluster {
	c := cluster(name, b)
	c.Tls = ut
	return c
}

func TestUpstreamTLS(t *testing.T) {
	ca, other := newTestCA(t, "ca"), newTestCA(t, "other")
	plain := newTLSBackend(t, "plain", ca, nil, false, []string{"abc.example.com"})
	sans := newTLSBackend(t, "sans", ca, nil, false, []string{"san.example.com"}, "spiffe://cluster.local/ns/a/sa/b")
	hostname := func() *irv1.UpstreamTLS {
		return &irv1.UpstreamTLS{ServerName: "abc.example.com", CaPem: ca.pem}
	}
	withSANs := func(sans ...*irv1.SubjectAltName) *irv1.UpstreamTLS {
		u := hostname()
		u.SubjectAltNames = sans
		return u
	}
	dns := func(v string) *irv1.SubjectAltName {
		return &irv1.SubjectAltName{Type: irv1.SubjectAltName_HOSTNAME, Value: v}
	}
	uri := func(v string) *irv1.SubjectAltName {
		return &irv1.SubjectAltName{Type: irv1.SubjectAltName_URI, Value: v}
	}
	cases := []struct {
		name   string
		be     *testBackend
		tls    *irv1.UpstreamTLS
		status int
	}{
		{"good CA and hostname", plain, hostname(), 200},
		{"hostname mismatch", plain, &irv1.UpstreamTLS{ServerName: "abc.example.org", CaPem: ca.pem}, 502},
		{"wrong CA", plain, &irv1.UpstreamTLS{ServerName: "abc.example.com", CaPem: other.pem}, 502},
		{"CA bundle with the right one second", plain, &irv1.UpstreamTLS{ServerName: "abc.example.com", CaPem: append(append([]byte{}, other.pem...), ca.pem...)}, 200},
		{"no CA at all", plain, &irv1.UpstreamTLS{ServerName: "abc.example.com"}, 502},
		{"system roots do not know a private CA", plain, &irv1.UpstreamTLS{ServerName: "abc.example.com", SystemRoots: true}, 502},
		{"DNS SAN verified instead of the hostname", sans, withSANs(dns("san.example.com")), 200},
		{"wrong DNS SAN", sans, withSANs(dns("nope.example.com")), 502},
		{"URI SAN", sans, withSANs(uri("spiffe://cluster.local/ns/a/sa/b")), 200},
		{"wrong URI SAN", sans, withSANs(uri("spiffe://cluster.local/ns/a/sa/c")), 502},
		{"one of several SANs", sans, withSANs(dns("nope.example.com"), uri("spiffe://cluster.local/ns/a/sa/b")), 200},
		{"no SAN of several", sans, withSANs(dns("nope.example.com"), uri("spiffe://x")), 502},
	}
	var routes []*irv1.Route
	var clusters []*irv1.Cluster
	for i, tc := range cases {
		name := "c" + string(rune('a'+i))
		routes = append(routes, route("r/"+name, "/"+name+"/", backend(name, 1)))
		clusters = append(clusters, tlsCluster(name, tc.be, tc.tls))
	}
	l := httpListener(0, server("", vhost("", routes...)))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, clusters))
	c := newClient(addrOf(t, p, l.Name), nil)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := "/c" + string(rune('a'+i)) + "/x"
			for range 2 { // the second request reuses the pooled TLS connection
				r := must(t, c.get(hostURL("http", "front.example.com", path)))
				if r.status != tc.status {
					t.Fatalf("status %d, want %d (body %q)", r.status, tc.status, r.body)
				}
				if tc.status == 200 && (r.header.Get("X-Got-SNI") != "abc.example.com" || r.header.Get("X-Got-Host") != "front.example.com") {
					t.Fatalf("backend saw SNI %q Host %q", r.header.Get("X-Got-SNI"), r.header.Get("X-Got-Host"))
				}
			}
		})
	}

	t.Run("bodies both ways over TLS", func(t *testing.T) {
		body := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB, streamed in both directions
		for _, chunked := range []bool{false, true} {
			var rd io.Reader = strings.NewReader(body)
			if chunked {
				rd = io.MultiReader(rd) // no length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, hostURL("http", "front.example.com", "/ca/post"), rd)
			r := must(t, c.do(req))
			if r.status != 200 || r.body != body {
				t.Fatalf("chunked=%v: status %d, %d of %d bytes back", chunked, r.status, len(r.body), len(body))
			}
		}
	})

	t.Run("websocket upgrade over TLS", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", addrOf(t, p, l.Name), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(conn, "GET /ca/ws HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade response %v, %v", resp, err)
		}
		_, _ = io.WriteString(conn, "ping\n")
		if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo %q, %v", line, err)
		}
	})
}

func TestUpstreamTLSClientCertificate(t *testing.T) {
	ca, clientCA := newTestCA(t, "ca"), newTestCA(t, "client-ca")
	be := newTLSBackend(t, "mtls", ca, clientCA, false, []string{"abc.example.com"})
	cert, key := clientCA.issue(t, "gateway-client", x509.ExtKeyUsageClientAuth, nil)
	sec := &irv1.Secret{Name: "ns/client", CertificatePem: cert, PrivateKeyPem: key}
	with := &irv1.UpstreamTLS{ServerName: "abc.example.com", CaPem: ca.pem, ClientCertificate: "ns/client"}
	without := &irv1.UpstreamTLS{ServerName: "abc.example.com", CaPem: ca.pem}
	l := httpListener(0, server("", vhost("",
		route("r/without", "/without", backend("without", 1)),
		route("r/with", "/with", backend("with", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{tlsCluster("with", be, with), tlsCluster("without", be, without)}, sec))
	c := newClient(addrOf(t, p, l.Name), nil)
	if r := must(t, c.get(hostURL("http", "x", "/with"))); r.status != 200 || r.header.Get("X-Got-Client") != "gateway-client" {
		t.Fatalf("with a client certificate: status %d, backend saw client %q", r.status, r.header.Get("X-Got-Client"))
	}
	if r := must(t, c.get(hostURL("http", "x", "/without"))); r.status != 502 {
		t.Fatalf("without a client certificate: status %d, want 502", r.status)
	}

	t.Run("a missing secret rejects the snapshot", func(t *testing.T) {
		bad := &irv1.UpstreamTLS{ServerName: "abc.example.com", CaPem: ca.pem, ClientCertificate: "ns/missing"}
		err := p.Apply(t.Context(), snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{tlsCluster("with", be, bad), tlsCluster("without", be, without)}))
		if err == nil || !strings.Contains(err.Error(), "ns/missing") {
			t.Fatalf("Apply: %v", err)
		}
	})
}

// An h2 cluster with TLS speaks HTTP/2 over TLS, agreed by ALPN: gRPC to a TLS backend.
func TestUpstreamTLSH2(t *testing.T) {
	ca := newTestCA(t, "ca")
	be := newTLSBackend(t, "h2tls", ca, nil, true, []string{"grpc.example.com"})
	cl := tlsCluster("grpc", be, &irv1.UpstreamTLS{ServerName: "grpc.example.com", CaPem: ca.pem})
	cl.Protocol = irv1.Cluster_H2C
	bad := tlsCluster("bad", be, &irv1.UpstreamTLS{ServerName: "other.example.com", CaPem: ca.pem})
	bad.Protocol = irv1.Cluster_H2C
	l := httpListener(0, server("", vhost("",
		route("r/bad", "/bad", backend("bad", 1)),
		route("r/grpc", "/", backend("grpc", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl, bad}))
	priorKnowledge := newClient(addrOf(t, p, l.Name), func(tr *http.Transport) {
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		tr.Protocols = &pr
	})
	for range 2 {
		r := must(t, priorKnowledge.get(hostURL("http", "grpc.front", "/svc/Method")))
		if r.status != 200 || r.header.Get("X-Got-Proto") != "HTTP/2.0" || r.header.Get("X-Got-SNI") != "grpc.example.com" {
			t.Fatalf("status %d upstream proto %q SNI %q", r.status, r.header.Get("X-Got-Proto"), r.header.Get("X-Got-SNI"))
		}
	}
	if r := must(t, priorKnowledge.get(hostURL("http", "grpc.front", "/bad"))); r.status != 502 {
		t.Fatalf("wrong hostname: status %d, want 502", r.status)
	}
}

// A pooled TLS connection the backend closed while it was idle is noticed before a request that
// cannot be replayed (a POST) is risked on it: the POST gets a fresh connection, not a 502.
func TestUpstreamTLSStaleConnection(t *testing.T) {
	ca := newTestCA(t, "ca")
	closed := make(chan struct{}, 8)
	be := newTLSBackendWith(t, "stale", ca, nil, false, []string{"abc.example.com"}, nil, func(s *http.Server) {
		s.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				closed <- struct{}{}
			}
		}
	})
	l := httpListener(0, server("", vhost("", route("r", "/", backend("c", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{tlsCluster("c", be, &irv1.UpstreamTLS{ServerName: "abc.example.com", CaPem: ca.pem})}))
	c := newClient(addrOf(t, p, l.Name), nil)
	for range 2 { // the second reuses the pooled connection: tickets were read with the first answer
		if r := must(t, c.get(hostURL("http", "x", "/"))); r.status != 200 {
			t.Fatalf("GET: status %d", r.status)
		}
	}
	be.srv.Config.SetKeepAlivesEnabled(false) // closes the idle connections, the proxy's among them
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the backend did not close the idle connection")
	}
	be.srv.Config.SetKeepAlivesEnabled(true)
	req, _ := http.NewRequest(http.MethodPost, hostURL("http", "x", "/"), strings.NewReader("once"))
	if r := must(t, c.do(req)); r.status != 200 || r.body != "once" {
		t.Fatalf("POST after the backend closed the pooled connection: status %d body %q", r.status, r.body)
	}
}
