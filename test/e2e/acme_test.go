package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/test/pebbletest"
)

const acmeHost = "app.example.test"

// acmeExample is examples/acme pointed at p, with the backend, listener ports and challenge given.
func acmeExample(t *testing.T, p *pebbletest.Server, httpPort, tlsPort, backend int, challenge string) map[string]string {
	t.Helper()
	files := exampleFiles(t, "acme", map[string]int{"port: 8080": httpPort, "port: 8443": tlsPort, "port: 9371": backend})
	gw := strings.ReplaceAll(files["gateway.yaml"], "https://127.0.0.1:14000/dir", p.Directory)
	if challenge != "" {
		gw = strings.Replace(gw, "    gateway.coxswain-labs.dev/acme-email:", "    gateway.coxswain-labs.dev/acme-challenge: "+challenge+"\n    gateway.coxswain-labs.dev/acme-email:", 1)
	}
	files["gateway.yaml"] = gw
	var ca strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(p.CAPEM)), "\n") {
		ca.WriteString("    " + line + "\n")
	}
	files["pebble-ca.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pebble-ca\ndata:\n  ca.crt: |\n" + ca.String()
	return files
}

// acmeClient is an HTTPS client that trusts only Pebble's issuing root and dials 127.0.0.1:port
// whatever the URL's host.
func acmeClient(roots *x509.CertPool, port int) *http.Client {
	d := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: acmeHost},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		},
	}}
}

// served waits until the HTTPS listener serves a certificate Pebble issued and routes to the
// backend; it returns the certificate.
func acmeServed(t *testing.T, c *http.Client, within time.Duration) *x509.Certificate {
	t.Helper()
	var leaf *x509.Certificate
	eventually(t, within, "the ACME certificate served", func() error {
		resp, err := c.Get("https://" + acmeHost + "/")
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"backend": "app"`) {
			return fmt.Errorf("GET /: %d %s", resp.StatusCode, b)
		}
		leaf = resp.TLS.PeerCertificates[0]
		return nil
	})
	return leaf
}

// TestExamplesACME runs examples/acme under `coxswain serve -f` against a real Pebble on
// loopback: the process is the ACME client and the proxy, and the certificate is obtained by
// each challenge type, answered by the proxy's own listeners.
func TestExamplesACME(t *testing.T) {
	for _, challenge := range []string{"http-01", "tls-alpn-01"} {
		t.Run(challenge, func(t *testing.T) {
			httpPort, tlsPort := freePort(t), freePort(t)
			p := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: tlsPort})
			s := startServe(t, acmeExample(t, p, httpPort, tlsPort, startHeaderEcho(t), challenge),
				"--acme-storage", t.TempDir())
			leaf := acmeServed(t, acmeClient(p.Roots(t), tlsPort), 60*time.Second)
			if leaf.Subject.CommonName != acmeHost && !strings.Contains(strings.Join(leaf.DNSNames, ","), acmeHost) {
				t.Errorf("certificate names %v, want %s", leaf.DNSNames, acmeHost)
			}
			// The challenge type asked for was answered, and no other: Pebble logs its HTTP
			// validations (only those).
			s.awaitLog("the challenge answered", "answering an ACME challenge", `"type":"`+challenge+`"`)
			if got := strings.Contains(p.Log(), "Attempting to validate w/ HTTP"); got != (challenge == "http-01") {
				t.Errorf("pebble validated over HTTP: %v, for challenge %s", got, challenge)
			}
			// Plain HTTP is redirected, now that the challenge is over.
			resp, err := noRedirects.Do(
				&http.Request{Method: http.MethodGet, URL: mustURL(t, fmt.Sprintf("http://127.0.0.1:%d/", httpPort)), Host: acmeHost})
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusMovedPermanently {
				t.Errorf("plain HTTP: %d, want 301", resp.StatusCode)
			}
			s.awaitLog("ACME certificate ready", acmeHost)
		})
	}
}

// TestACMERenewal has Pebble issue 30-second certificates: serve renews each before it expires,
// and a keep-alive connection opened on the first certificate keeps serving across the renewal.
func TestACMERenewal(t *testing.T) {
	httpPort, tlsPort := freePort(t), freePort(t)
	p := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: tlsPort, Validity: 30 * time.Second})
	startServe(t, acmeExample(t, p, httpPort, tlsPort, startHeaderEcho(t), "http-01"),
		"--acme-storage", t.TempDir(), "--acme-renew-check-interval", "1s", "--acme-renewal-window", "0.5")
	roots := p.Roots(t)
	kept := acmeClient(roots, tlsPort)
	first := acmeServed(t, kept, 60*time.Second)
	eventually(t, 60*time.Second, "a renewed certificate on new connections", func() error {
		c := acmeClient(roots, tlsPort)
		defer c.CloseIdleConnections()
		leaf := acmeServed(t, c, 5*time.Second)
		if leaf.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return fmt.Errorf("still serial %s (valid until %s)", first.SerialNumber, first.NotAfter.Format(time.TimeOnly))
		}
		return nil
	})
	// The connection of the first certificate was not closed by the swap.
	reused := false
	req, _ := http.NewRequest(http.MethodGet, "https://"+acmeHost+"/", nil)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
	}))
	resp, err := kept.Do(req)
	if err != nil {
		t.Fatalf("the keep-alive connection after renewal: %v", err)
	}
	_ = resp.Body.Close()
	if !reused || resp.TLS.PeerCertificates[0].SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Errorf("reused %v, serial %s: want the first connection, still on serial %s", reused, resp.TLS.PeerCertificates[0].SerialNumber, first.SerialNumber)
	}
}

// TestACMERefused: a CA that refuses the name leaves the listener Programmed=False (Pending) with
// the CA's reason in the condition and the problems, while the HTTP listener keeps serving.
func TestACMERefused(t *testing.T) {
	httpPort, tlsPort := freePort(t), freePort(t)
	p := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort, TLSPort: tlsPort, Blocklist: []string{acmeHost}})
	s := startServe(t, acmeExample(t, p, httpPort, tlsPort, startHeaderEcho(t), ""), "--acme-storage", t.TempDir())
	eventually(t, 30*time.Second, "the refusal reported", func() error {
		body, _, err := s.adminGet("/status")
		if err != nil {
			return err
		}
		if !strings.Contains(body, "Pending") || !strings.Contains(body, "rejectedIdentifier") {
			return fmt.Errorf("/status has no Pending listener with the CA's reason:\n%s", body)
		}
		return nil
	})
	// No certificate, so no handshake but the CA's own validation succeeds.
	c := acmeClient(x509.NewCertPool(), tlsPort)
	if resp, err := c.Get("https://" + acmeHost + "/"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("an HTTPS request got %d without a certificate", resp.StatusCode)
	}
	resp, err := noRedirects.Do(&http.Request{Method: http.MethodGet, URL: mustURL(t, fmt.Sprintf("http://127.0.0.1:%d/", httpPort)), Host: acmeHost})
	if err != nil {
		t.Fatalf("the HTTP listener: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently {
		t.Errorf("plain HTTP: %d, want 301", resp.StatusCode)
	}
}

var noRedirects = &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
