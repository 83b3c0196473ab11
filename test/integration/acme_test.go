package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/acme"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
	"github.com/coxswain-labs/coxswain/test/pebbletest"
)

// TestACMELeaderFailover runs two controllers on one Lease against a real Pebble: the leader is
// the ACME client, its in-process proxy answers the challenge, and the certificate lands in
// Secrets. A leader frozen in the middle of an issuance (holding the issuance lock) and then
// killed hands over to the standby, which waits the lock out and obtains the certificate; a
// leader killed after issuance hands over to one that loads it from the Secrets. Pebble issues
// exactly one certificate in all.
func TestACMELeaderFailover(t *testing.T) {
	e := env.Start(t)
	const lease, host, httpPort, tlsPort = "acme-failover", "acme.example.test", 18420, 18421
	p := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: tlsPort, Address: gatewayIP})
	flags := func(id string) []string {
		return []string{"--leader-election-namespace", "default", "--leader-election-id", lease,
			"--leader-election-identity", id, "--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "500ms",
			"--acme-lock-ttl", "5s"}
	}
	procs := map[string]*process{"a": startProcess(t, e, "a", flags("a")...), "b": startProcess(t, e, "b", flags("b")...)}
	ns := namespace(t, e, "acme", nil)
	startBackend(t, "be", "10.99.7.1:8080")
	createService(t, e, ns, "svc", "10.99.7.1")
	createClass(t, e, "coxswain", "")
	if _, err := e.Kube.CoreV1().ConfigMaps(ns).Create(ctxFor(t), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "pebble-ca"}, Data: map[string]string{"ca.crt": string(p.CAPEM)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	leader := holder(t, e, lease, "")
	standby := map[string]string{"a": "b", "b": "a"}[leader]

	hostname := gwapiv1.Hostname(host)
	_, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw", Annotations: map[string]string{
			translator.ACMEDirectoryAnnotation: p.Directory, translator.ACMECAAnnotation: "pebble-ca",
			translator.ACMEChallengeAnnotation: "http-01",
		}},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: "coxswain", Listeners: []gwapiv1.Listener{
			httpListener("http", httpPort),
			{Name: "https", Port: tlsPort, Protocol: gwapiv1.HTTPSProtocolType, Hostname: &hostname},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createRoute(t, e, httpRoute(ns, "app", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{host}, prefixRule("/", backendRef("svc", 1))))

	// The leader takes the issuance lock (a Lease) before it orders; freeze it right there.
	eventually(t, "the leader holding the issuance lock", func() error {
		leases, err := e.Kube.CoordinationV1().Leases("default").List(ctxFor(t), metav1.ListOptions{LabelSelector: acme.StorageLabel})
		if err != nil {
			return err
		}
		for _, l := range leases.Items {
			if strings.HasPrefix(l.Annotations[acme.KeyAnnotation], "issue_cert_") {
				return nil
			}
		}
		return fmt.Errorf("no issuance lock among %d Leases", len(leases.Items))
	})
	procs[leader].signal(syscall.SIGSTOP)
	holder(t, e, lease, standby)
	procs[leader].signal(syscall.SIGKILL) // frees its ports; its issuance Lease stays behind, unrenewed
	procs[leader].wait(t)
	killed := time.Now()
	t.Logf("leader %s frozen mid-issuance and killed; %s leads", leader, standby)

	roots := p.Roots(t)
	first := servedCert(t, roots, host, tlsPort)
	t.Logf("the new leader served the certificate %s after the kill (lock TTL 5s)", time.Since(killed).Round(time.Millisecond))
	if n := p.Issued(); n != 1 {
		t.Errorf("pebble issued %d certificates, want 1", n)
	}
	if !strings.Contains(procs[standby].out.String(), "lock acquired") {
		t.Errorf("the new leader did not take the issuance lock:\n%s", tail(procs[standby].out.String(), 4000))
	}

	// A new standby; the leader dies after issuance: the next one loads the certificate.
	procs["c"] = startProcess(t, e, "c", flags("c")...)
	procs[standby].signal(syscall.SIGKILL)
	procs[standby].wait(t)
	holder(t, e, lease, "c")
	eventually(t, "the new leader serving the stored certificate", func() error {
		leaf, err := handshake(roots, host, tlsPort)
		if err != nil {
			return err
		}
		if leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
			return fmt.Errorf("serial %s, want the stored %s", leaf.SerialNumber, first.SerialNumber)
		}
		return nil
	})
	if !strings.Contains(procs["c"].out.String(), "ACME certificate ready") {
		t.Errorf("c did not load the certificate:\n%s", tail(procs["c"].out.String(), 4000))
	}
	if n := p.Issued(); n != 1 {
		t.Errorf("after the second failover pebble issued %d certificates, want 1", n)
	}
	secs, err := e.Kube.CoreV1().Secrets("default").List(ctxFor(t), metav1.ListOptions{LabelSelector: acme.StorageLabel})
	if err != nil {
		t.Fatal(err)
	}
	crts := 0
	for _, s := range secs.Items {
		if strings.HasSuffix(s.Annotations[acme.KeyAnnotation], host+".crt") {
			crts++
		}
	}
	if crts != 1 {
		t.Errorf("%d certificate Secrets for %s, want 1", crts, host)
	}
}

// handshake returns the leaf certificate gatewayIP:port presents for host, verified against roots.
func handshake(roots *x509.CertPool, host string, port int) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 2 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(gatewayIP, strconv.Itoa(port)), &tls.Config{RootCAs: roots, ServerName: host})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Close() }()
	return c.ConnectionState().PeerCertificates[0], nil
}

// servedCert waits until host is served over HTTPS with a certificate of roots, routed to the
// backend, and returns the certificate.
func servedCert(t *testing.T, roots *x509.CertPool, host string, port int) *x509.Certificate {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: host}, DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(gatewayIP, strconv.Itoa(port)))
		},
	}}
	var leaf *x509.Certificate
	eventually(t, "the ACME certificate served", func() error {
		resp, err := c.Get("https://" + host + "/")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Backend") != "be" {
			return fmt.Errorf("GET /: %d from %q", resp.StatusCode, resp.Header.Get("X-Backend"))
		}
		leaf = resp.TLS.PeerCertificates[0]
		return nil
	})
	return leaf
}
