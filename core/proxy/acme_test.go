package proxy_test

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
)

// TestACMEChallenges: the proxy answers the ACME validations its snapshot carries and nothing
// else. HTTP-01 exactly for (hostname, token), before the routes, on a cleartext listener;
// TLS-ALPN-01 for a handshake offering only acme-tls/1, on an HTTPS Server still waiting for its
// certificate, closing the connection after it; every other handshake there fails. A snapshot
// without the challenges answers them no more.
func TestACMEChallenges(t *testing.T) {
	be := newBackend(t, "app", nil)
	alpnCert, alpnKey := testmod.Cert(t, "acme validation", "secure.example")
	chs := []*irv1.ACMEChallenge{
		{Type: irv1.ACMEChallenge_HTTP_01, Hostname: "app.example", Token: "tok", KeyAuthorization: "tok.thumbprint"},
		{Type: irv1.ACMEChallenge_TLS_ALPN_01, Hostname: "secure.example", CertificatePem: alpnCert, PrivateKeyPem: alpnKey},
	}
	plain := httpListener(0, server("app.example", vhost("app.example", route("r/app", "/", backend("app", 1)))))
	waiting := httpsListener(closedPort(t), &irv1.Server{Hostname: "secure.example", Tls: &irv1.TLS{}})
	snap := func(with bool) *irv1.Snapshot {
		s := &irv1.Snapshot{Listeners: []*irv1.Listener{plain, waiting}, Clusters: []*irv1.Cluster{cluster("app", be)}}
		if with {
			s.AcmeChallenges = chs
		}
		if err := irv1.Seal(s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	p := newProxy(t)
	apply(t, p, snap(true))
	c := newClient(addrOf(t, p, plain.Name), nil)
	tlsAddr := addrOf(t, p, waiting.Name)

	for _, tc := range []struct {
		name, host, path string
		status           int
		body             string // "" : the backend's echo
	}{
		{"the challenge", "app.example", "/.well-known/acme-challenge/tok", 200, "tok.thumbprint"},
		{"with a port in Host", "app.example:80", "/.well-known/acme-challenge/tok", 200, "tok.thumbprint"},
		{"another token goes to the routes", "app.example", "/.well-known/acme-challenge/other", 200, ""},
		{"another host does not get it", "other.example", "/.well-known/acme-challenge/tok", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.get(hostURL("http", tc.host, tc.path))
			if r.err != nil || r.status != tc.status {
				t.Fatalf("%d %v, want %d", r.status, r.err, tc.status)
			}
			if tc.body != "" && r.body != tc.body {
				t.Errorf("body %q, want %q", r.body, tc.body)
			}
			if tc.body == "" && r.body == "tok.thumbprint" {
				t.Errorf("answered the key authorization")
			}
		})
	}

	t.Run("TLS-ALPN-01", func(t *testing.T) {
		conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "secure.example", NextProtos: []string{proxy.ACMETLSALPNProto}, InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		st := conn.ConnectionState()
		if st.NegotiatedProtocol != proxy.ACMETLSALPNProto || st.PeerCertificates[0].Subject.CommonName != "acme validation" {
			t.Errorf("negotiated %q with %q", st.NegotiatedProtocol, st.PeerCertificates[0].Subject.CommonName)
		}
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("the validation connection stayed open: %v", err)
		}
	})
	t.Run("other handshakes fail without a certificate", func(t *testing.T) {
		conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "secure.example", NextProtos: []string{"h2", "http/1.1"}, InsecureSkipVerify: true})
		if err == nil {
			_ = conn.Close()
			t.Fatal("a client handshake succeeded on a Server without a certificate")
		}
	})

	apply(t, p, snap(false))
	if r := c.get(hostURL("http", "app.example", "/.well-known/acme-challenge/tok")); r.body == "tok.thumbprint" {
		t.Errorf("answered after the challenge left the snapshot")
	}
	if conn, err := tls.Dial("tcp", tlsAddr, &tls.Config{ServerName: "secure.example", NextProtos: []string{proxy.ACMETLSALPNProto}, InsecureSkipVerify: true}); err == nil {
		_ = conn.Close()
		t.Errorf("a TLS-ALPN-01 handshake succeeded after the challenge left the snapshot")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
