package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestDiscoveryRefusals talks to a real controller process with real TLS and a real TokenReview:
// a client without an SVID, a bootstrap without a token, a token for another audience, a dedicated
// proxy presenting another ServiceAccount's identity, an expired certificate, a certificate from a
// foreign CA, a client that skips the TLS handshake and a Hello of another wire version are all
// refused, each with a log line and a coxswain_discovery_refusals_total reason, and none of them
// gets a snapshot byte; a dedicated proxy with its Gateway's identity serves that Gateway.
func TestDiscoveryRefusals(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctrl := startFleetController(t, e, "controller", ctrlNS, "--leader-elect=false")
	ns := namespace(t, e, "apps", nil)
	eventually(t, "controller leads", func() error {
		if f, err := ctrl.fleet(); err != nil || !f.Leader {
			return fmt.Errorf("leader=%v (%v)", f.Leader, err)
		}
		return nil
	})
	files := mountProxyFiles(t, e, ctrlNS, ns, "coxswain-a") // the identity of Gateway a's dedicated proxies
	bundle, err := os.ReadFile(files.bundle)
	if err != nil {
		t.Fatal(err)
	}
	roots, err := svid.ParseBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(t *testing.T, cert *tls.Certificate) *grpc.ClientConn {
		t.Helper()
		cfg := &tls.Config{MinVersion: tls.VersionTLS13,
			InsecureSkipVerify: true, //nolint:gosec // the SPIFFE check below replaces host-name verification
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				c, err := x509.ParseCertificate(raw[0])
				if err != nil {
					return err
				}
				return svid.VerifyController([]*x509.Certificate{c}, roots, "integration.test", time.Now())
			}}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		cc, err := grpc.NewClient("passthrough:///"+ctrl.discovery, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		return cc
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	csr, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	bootstrap := func(t *testing.T, token string) (*tls.Certificate, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := discv1.NewBootstrapServiceClient(conn(t, nil)).IssueCertificate(ctx, &discv1.IssueCertificateRequest{Token: token, Csr: csr})
		if err != nil {
			return nil, err
		}
		leaf, err := x509.ParseCertificate(resp.GetCertificateChain()[0])
		if err != nil {
			t.Fatal(err)
		}
		return &tls.Certificate{Certificate: resp.GetCertificateChain(), PrivateKey: key, Leaf: leaf}, nil
	}
	stream := func(t *testing.T, cert *tls.Certificate, hello *discv1.Hello) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := discv1.NewDiscoveryServiceClient(conn(t, cert)).Stream(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(&discv1.StreamRequest{Kind: &discv1.StreamRequest_Hello{Hello: hello}}); err == nil {
			_, err = st.Recv()
			return err
		}
		_, err = st.Recv()
		return err
	}
	dedicated := func(gw string) *discv1.Hello {
		return &discv1.Hello{WireVersion: discv1.WireVersion_WIRE_VERSION_1, Node: "n", Mode: discv1.Mode_MODE_DEDICATED,
			Gateway: &discv1.GatewayRef{Namespace: ns, Name: gw}}
	}
	expect := func(t *testing.T, err error, code codes.Code, msg string) {
		t.Helper()
		if status.Code(err) != code || !strings.Contains(fmt.Sprint(err), msg) {
			t.Fatalf("got %v, want %v containing %q", err, code, msg)
		}
	}
	// metric reads one series of the controller's /metrics (0 when absent).
	metric := func(t *testing.T, series string) float64 {
		t.Helper()
		body, err := httpGet("http://" + ctrl.admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				var f float64
				if _, err := fmt.Sscan(v, &f); err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		return 0
	}
	// refused checks that one more refusal of reason was counted and logged (a line with all of
	// logged) since before.
	refused := func(t *testing.T, reason string, before float64, logged ...string) {
		t.Helper()
		series := `coxswain_discovery_refusals_total{reason="` + reason + `"}`
		eventually(t, "the refusal counted and logged", func() error {
			if got := metric(t, series); got < before+1 {
				return fmt.Errorf("%s = %v, want > %v", series, got, before)
			}
			for _, line := range strings.Split(ctrl.out.String(), "\n") {
				ok := strings.Contains(line, `"reason": "`+reason+`"`) // the console encoder's fields
				for _, l := range logged {
					ok = ok && strings.Contains(line, l)
				}
				if ok {
					return nil
				}
			}
			return fmt.Errorf("no log line with reason %s and %q", reason, logged)
		})
	}
	reasonCount := func(t *testing.T, reason string) float64 {
		return metric(t, `coxswain_discovery_refusals_total{reason="`+reason+`"}`)
	}
	pushBytes := metric(t, "coxswain_discovery_snapshot_push_bytes_total")

	t.Run("a client without an SVID", func(t *testing.T) {
		before := reasonCount(t, "no_svid")
		expect(t, stream(t, nil, dedicated("a")), codes.Unauthenticated, "client certificate")
		refused(t, "no_svid", before, "discovery stream refused")
	})
	t.Run("a proxy with no token", func(t *testing.T) {
		before := reasonCount(t, "bootstrap_bad_request")
		_, err := bootstrap(t, "")
		expect(t, err, codes.InvalidArgument, "token is required")
		refused(t, "bootstrap_bad_request", before, "bootstrap refused")
	})
	t.Run("a token with the wrong audience", func(t *testing.T) {
		before := reasonCount(t, "bootstrap_token")
		_, err := bootstrap(t, serviceAccountToken(t, e, ns, "coxswain-a", "not-coxswain"))
		expect(t, err, codes.Unauthenticated, "token not accepted")
		refused(t, "bootstrap_token", before, "bootstrap refused")
	})
	t.Run("a certificate from a foreign CA", func(t *testing.T) {
		before := reasonCount(t, "tls_unknown_ca")
		certPEM, keyPEM, err := discovery.NewCA("integration.test", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := discovery.LoadCA("integration.test", certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		c, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, k)
		chain, leaf, err := foreign.IssueSVID(c, svid.ID{TrustDomain: "integration.test", Namespace: ns, ServiceAccount: "coxswain-a"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, stream(t, &tls.Certificate{Certificate: chain, PrivateKey: k, Leaf: leaf}, dedicated("a")), codes.Unavailable, "")
		refused(t, "tls_unknown_ca", before, "refused in the TLS handshake")
	})
	t.Run("a client that skips the TLS handshake", func(t *testing.T) {
		before := reasonCount(t, "tls_handshake")
		c, err := net.DialTimeout("tcp", ctrl.discovery, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// Plaintext gRPC: the HTTP/2 preface and an empty SETTINGS frame.
		_, _ = io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c)
		if err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("reading the answer: %v", err)
		}
		// At most a TLS alert record (type 21): never an HTTP/2 frame, never a snapshot.
		if len(got) > 0 && got[0] != 0x15 {
			t.Fatalf("answered %q", got)
		}
		refused(t, "tls_handshake", before, "refused in the TLS handshake")
	})
	t.Run("a Hello of another wire version", func(t *testing.T) {
		before := reasonCount(t, "wire_version")
		cert, err := bootstrap(t, serviceAccountToken(t, e, ns, "coxswain-a", svid.Audience))
		if err != nil {
			t.Fatal(err)
		}
		hello := dedicated("a")
		hello.WireVersion = discv1.WireVersion(99)
		expect(t, stream(t, cert, hello), codes.FailedPrecondition, "wire version")
		refused(t, "wire_version", before, "discovery stream refused")
	})
	t.Run("a dedicated proxy presenting another Gateway's identity", func(t *testing.T) {
		cert, err := bootstrap(t, serviceAccountToken(t, e, ns, "coxswain-b", svid.Audience))
		if err != nil {
			t.Fatal(err)
		}
		before := reasonCount(t, "identity")
		expect(t, stream(t, cert, dedicated("a")), codes.PermissionDenied, "is served by ServiceAccount "+ns+"/coxswain-a")
		refused(t, "identity", before, "discovery stream refused", "coxswain-b")

		// The same as a real proxy process: refused, never ready, nothing served.
		wrong := mountProxyFiles(t, e, ctrlNS, ns, "coxswain-b")
		p := startProxyProcess(t, "impostor", "10.99.0.42", wrong, ctrl.discovery, "--gateway", ns+"/a")
		eventually(t, "the impostor refused", func() error {
			if !strings.Contains(p.out.String(), "PermissionDenied") {
				return fmt.Errorf("not refused yet")
			}
			return nil
		})
		if code, err := p.readyz(); code != 503 {
			t.Fatalf("a refused proxy's /readyz = %d (%v), want 503", code, err)
		}
	})
	t.Run("an expired certificate", func(t *testing.T) {
		sec, err := e.Kube.CoreV1().Secrets(ctrlNS).Get(ctxFor(t), "coxswain-discovery-ca", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ca, err := discovery.LoadCA("integration.test", sec.Data[discovery.CACertKey], sec.Data[discovery.CAKeyKey])
		if err != nil {
			t.Fatal(err)
		}
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		c, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, k)
		chain, leaf, err := ca.IssueSVID(c, svid.ID{TrustDomain: "integration.test", Namespace: ns, ServiceAccount: "coxswain-a"}, -time.Minute/2)
		if err != nil {
			t.Fatal(err)
		}
		before := reasonCount(t, "tls_expired_certificate")
		expect(t, stream(t, &tls.Certificate{Certificate: chain, PrivateKey: k, Leaf: leaf}, dedicated("a")), codes.Unavailable, "")
		refused(t, "tls_expired_certificate", before, "refused in the TLS handshake")
	})
	t.Run("no refused client got a snapshot byte", func(t *testing.T) {
		if got := metric(t, "coxswain_discovery_snapshot_push_bytes_total"); got != pushBytes {
			t.Fatalf("%v snapshot bytes pushed during the refusals", got-pushBytes)
		}
	})
	t.Run("a dedicated proxy with its Gateway's identity serves its Gateway only", func(t *testing.T) {
		startBackend(t, "be", "10.99.9.5:8080")
		createService(t, e, ns, "svc", "10.99.9.5")
		createClass(t, e, "coxswain", "")
		for _, gw := range []struct {
			name string
			port int
		}{{"a", 18900}, {"b", 18901}} {
			createGateway(t, e, ns, gw.name, "coxswain", httpListener("http", gw.port))
			createRoute(t, e, httpRoute(ns, gw.name, []gwapiv1.ParentReference{parentRef(ns, gw.name)}, nil, prefixRule("/", backendRef("svc", 1))))
		}
		p := startProxyProcess(t, "dedicated-a", "10.99.0.41", files, ctrl.discovery, "--gateway", ns+"/a")
		servedAt(t, p.ip, 18900, "any.example", "/", 200, "be")
		waitGateway(t, e, ns, "a", func(gw *gwapiv1.Gateway) error { return checkConds(gw.Status.Conditions, gw.Generation, programmed) })
		if r, err := getAt(p.ip, 18901, "any.example", "/"); err == nil {
			t.Fatalf("the dedicated proxy of a serves b's port: %d", r.status)
		}
		gwb, err := e.Gateway.GatewayV1().Gateways(ns).Get(ctxFor(t), "b", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := checkConds(gwb.Status.Conditions, gwb.Generation, cond{"Programmed", "False", "Pending"}); err != nil {
			t.Fatalf("Gateway b with no proxy of its own: %v", err)
		}
	})
}
