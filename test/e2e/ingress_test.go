package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExamplesIngress serves examples/ingress under `coxswain serve -f` with the Ingress
// listeners on loopback, and checks each routing rule of the example: Prefix element-wise, Exact,
// the one-label wildcard, defaultBackend, the header annotation, and TLS by SNI from the
// Ingress's Secret.
func TestExamplesIngress(t *testing.T) {
	httpPort, httpsPort := freePort(t), freePort(t)
	ports := map[string]int{}
	for i, n := range []string{"api", "exact", "wild", "default"} {
		ports["port: "+strconv.Itoa(9101+i)] = startBackend(t, n).port
	}
	startServe(t, exampleFiles(t, "ingress", ports),
		"--ingress-http-address", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--ingress-https-address", fmt.Sprintf("127.0.0.1:%d", httpsPort))
	base := fmt.Sprintf("http://127.0.0.1:%d", httpPort)
	cases := []struct{ host, path, want string }{
		{"app.example.com", "/api", "api"},
		{"app.example.com", "/api/v1", "api"},
		{"app.example.com", "/apix", "wild"}, // not element-wise under /api: the wildcard's /
		{"app.example.com", "/exact", "exact"},
		{"app.example.com", "/exact/x", "wild"},
		{"a.example.com", "/anything", "wild"},
		{"a.b.example.com", "/anything", "default"}, // two labels: not the wildcard
		{"other.test", "/", "default"},
	}
	for _, c := range cases {
		eventually(t, 10*time.Second, c.host+c.path, func() error {
			res, err := do(context.Background(), noRedirect, request{url: base + c.path, host: c.host})
			if err != nil {
				return err
			}
			if got := res.backendOf(); got != c.want {
				return fmt.Errorf("answered by %q (status %d), want %s", got, res.code, c.want)
			}
			if c.want == "api" && (res.echo == nil || http.Header(res.echo.Headers).Get("X-From") != "ingress") {
				return fmt.Errorf("x-from header missing: %+v", res.echo)
			}
			return nil
		})
	}

	ca, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", "demo-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "app.example.com"}}}
	eventually(t, 10*time.Second, "https app.example.com/api", func() error {
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/api", httpsPort), nil)
		req.Host = "app.example.com"
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = res.Body.Close() }()
		if b := res.Header.Get("X-Backend"); b != "api" {
			return fmt.Errorf("status %d from %q, want api", res.StatusCode, b)
		}
		if !strings.Contains(strings.Join(res.TLS.PeerCertificates[0].DNSNames, ","), "example.com") {
			return fmt.Errorf("served certificate %v", res.TLS.PeerCertificates[0].DNSNames)
		}
		return nil
	})
}
