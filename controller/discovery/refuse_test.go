package discovery_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
)

// svidFor signs an SVID for ns/sa with ca, valid for ttl (negative: already expired).
func svidFor(t *testing.T, ca *discovery.CA, ns, sa string, ttl time.Duration) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	chain, leaf, err := ca.IssueSVID(csr, svid.ID{TrustDomain: ca.TrustDomain(), Namespace: ns, ServiceAccount: sa}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: leaf}
}

// dial connects to the server as a client presenting cert (none when nil), verifying the
// server against the bundle.
func dial(t *testing.T, s *testServer, cert *tls.Certificate) *grpc.ClientConn {
	t.Helper()
	roots, err := svid.ParseBundle(s.ca.Bundle())
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: "ignored",
		InsecureSkipVerify: true, //nolint:gosec // the SPIFFE check below replaces host-name verification
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			return svid.VerifyController([]*x509.Certificate{c}, roots, trustDomain, time.Now())
		}}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient("passthrough:///"+s.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// openStream says hello and returns how the stream answered. When the server keeps it open
// (accepted), it returns nil once the server lists the node in its fleet.
func openStream(t *testing.T, s *testServer, conn *grpc.ClientConn, hello *discv1.Hello) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := discv1.NewDiscoveryServiceClient(conn).Stream(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&discv1.StreamRequest{Kind: &discv1.StreamRequest_Hello{Hello: hello}}); err != nil {
		_, err = st.Recv()
		return err
	}
	ended := make(chan error, 1)
	go func() {
		_, err := st.Recv()
		ended <- err
	}()
	for {
		select {
		case err := <-ended:
			return err
		case <-time.After(10 * time.Millisecond):
		}
		for _, p := range s.Fleet().Proxies {
			if p.Node == hello.GetNode() {
				return nil
			}
		}
	}
}

func sharedHello(node string) *discv1.Hello {
	return &discv1.Hello{WireVersion: discv1.WireVersion_WIRE_VERSION_1, Node: node, Mode: discv1.Mode_MODE_SHARED}
}

func dedicatedHello(node, ns, name string) *discv1.Hello {
	return &discv1.Hello{WireVersion: discv1.WireVersion_WIRE_VERSION_1, Node: node, Mode: discv1.Mode_MODE_DEDICATED,
		Gateway: &discv1.GatewayRef{Namespace: ns, Name: name}}
}

func TestRefusals(t *testing.T) {
	s := startServer(t)
	s.lead(t)
	other := startServer(t) // another CA
	tests := []struct {
		name  string
		cert  *tls.Certificate
		hello *discv1.Hello
		code  codes.Code
		msg   string
	}{
		{name: "no client certificate", hello: sharedHello("n"), code: codes.Unauthenticated, msg: "client certificate"},
		{name: "expired SVID", cert: svidFor(t, s.ca, "coxswain-system", "coxswain-proxy", -30*time.Second),
			hello: sharedHello("n"), code: codes.Unavailable}, // refused in the TLS handshake
		{name: "SVID of another CA", cert: svidFor(t, other.ca, "coxswain-system", "coxswain-proxy", time.Hour),
			hello: sharedHello("n"), code: codes.Unavailable},
		{name: "shared mode by a ServiceAccount not allowed to", cert: svidFor(t, s.ca, "apps", "someone-else", time.Hour),
			hello: sharedHello("n"), code: codes.PermissionDenied, msg: "may not run a shared proxy"},
		{name: "dedicated proxy presenting another Gateway's identity", cert: svidFor(t, s.ca, "apps", "coxswain-b", time.Hour),
			hello: dedicatedHello("n", "apps", "a"), code: codes.PermissionDenied, msg: "is served by ServiceAccount apps/coxswain-a"},
		{name: "unknown wire version", cert: svidFor(t, s.ca, "coxswain-system", "coxswain-proxy", time.Hour),
			hello: &discv1.Hello{Node: "n", Mode: discv1.Mode_MODE_SHARED}, code: codes.FailedPrecondition, msg: "wire version"},
		{name: "the Gateway's own identity is accepted", cert: svidFor(t, s.ca, "apps", "coxswain-a", time.Hour),
			hello: dedicatedHello("n", "apps", "a"), code: codes.OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := openStream(t, s, dial(t, s, tc.cert), tc.hello)
			if status.Code(err) != tc.code || (tc.msg != "" && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}

	t.Run("standby", func(t *testing.T) {
		s.stepDown(t)
		err := openStream(t, s, dial(t, s, svidFor(t, s.ca, "coxswain-system", "coxswain-proxy", time.Hour)), sharedHello("n"))
		if status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("standby answered %v", err)
		}
	})

	t.Run("bootstrap with a token that does not authenticate", func(t *testing.T) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := discv1.NewBootstrapServiceClient(dial(t, s, nil)).IssueCertificate(ctx,
			&discv1.IssueCertificateRequest{Token: "wrong", Csr: csr})
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("got %v", err)
		}
		resp, err := discv1.NewBootstrapServiceClient(dial(t, s, nil)).IssueCertificate(ctx,
			&discv1.IssueCertificateRequest{Token: "gw-a-token", Csr: csr})
		if err != nil || resp.GetSpiffeId() != "spiffe://"+trustDomain+"/ns/apps/sa/coxswain-a" {
			t.Fatalf("got %v, %v", resp.GetSpiffeId(), err)
		}
	})
}
