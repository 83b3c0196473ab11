package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startIngressExample serves examples/ingress with the Ingress listeners on loopback and returns
// the HTTP base URL, the HTTPS port and the server.
func startIngressExample(t *testing.T) (string, int, *server) {
	t.Helper()
	httpPort, httpsPort := freePort(t), freePort(t)
	ports := map[string]int{}
	for i, n := range []string{"api", "exact", "wild", "default"} {
		ports["port: "+strconv.Itoa(9101+i)] = startBackend(t, n).port
	}
	s := startServe(t, exampleFiles(t, "ingress", ports),
		"--ingress-http-address", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--ingress-https-address", fmt.Sprintf("127.0.0.1:%d", httpsPort))
	return fmt.Sprintf("http://127.0.0.1:%d", httpPort), httpsPort, s
}

// expectStatus waits until a request for host+path with headers answers want (and, with a
// backend named, comes from it).
func expectStatus(t *testing.T, base, host, path string, headers map[string]string, want int, backend string) *result {
	t.Helper()
	var got *result
	eventually(t, 10*time.Second, fmt.Sprintf("%s%s %v", host, path, headers), func() error {
		res, err := do(context.Background(), noRedirect, request{url: base + path, host: host, headers: headers})
		if err != nil {
			return err
		}
		if res.code != want || (backend != "" && res.backendOf() != backend) {
			return fmt.Errorf("status %d from %s, want %d from %q", res.code, res.backendOf(), want, backend)
		}
		got = res
		return nil
	})
	return got
}

// TestExamplesIngressForwardedFor: trust-forwarded-for makes the X-Forwarded-For entry of the
// trusted proxy the client that IpAccessControl judges; forwarded-for-trusted-cidrs trusts the
// header only from a peer in the ranges and skips the proxies' entries.
func TestExamplesIngressForwardedFor(t *testing.T) {
	base, _, _ := startIngressExample(t)
	xff := func(v string) map[string]string { return map[string]string{"X-Forwarded-For": v} }
	expectStatus(t, base, "forwarded.example.test", "/", xff("203.0.113.5"), http.StatusOK, "api")
	expectStatus(t, base, "forwarded.example.test", "/", nil, http.StatusForbidden, "")
	expectStatus(t, base, "forwarded.example.test", "/", xff("198.51.100.1"), http.StatusForbidden, "")
	// One trusted proxy: the rightmost entry is the client, whatever it claims to its left.
	expectStatus(t, base, "forwarded.example.test", "/", xff("203.0.113.5, 198.51.100.1"), http.StatusForbidden, "")
	expectStatus(t, base, "cidrs.example.test", "/", xff("203.0.113.5, 127.0.0.9, 127.0.0.8"), http.StatusOK, "api")
	expectStatus(t, base, "cidrs.example.test", "/", xff("203.0.113.5, 198.51.100.1, 127.0.0.9"), http.StatusForbidden, "")
	// The annotation is per Ingress: the app Ingress's hosts keep the peer as client.
	expectStatus(t, base, "app.example.com", "/api", xff("203.0.113.5"), http.StatusOK, "api")
}

// TestExamplesIngressLoadBalance: load-balance hash:header=x-user sends each user to one backend
// of the pair Service, and different users to both; connect-timeout is on the same cluster,
// which the admin API shows as the proxy got it.
func TestExamplesIngressLoadBalance(t *testing.T) {
	base, _, s := startIngressExample(t)
	seen := map[string]bool{}
	for i := range 16 {
		user := map[string]string{"x-user": "user-" + strconv.Itoa(i)}
		first := expectStatus(t, base, "balanced.example.test", "/", user, http.StatusOK, "").backendOf()
		for range 3 {
			if got := expectStatus(t, base, "balanced.example.test", "/", user, http.StatusOK, "").backendOf(); got != first {
				t.Fatalf("user-%d went to %s, then to %s", i, first, got)
			}
		}
		seen[first] = true
	}
	if !seen["exact"] || !seen["wild"] || len(seen) != 2 {
		t.Errorf("users went to %v, want both exact and wild", seen)
	}
	// The proxy's access log names the cluster it sent to: the variant with both settings (the
	// proxy's connect timeout itself is tested in core/proxy, conntimeout_linux_test.go).
	want := `"backend":"default/pair:80/with=lb=hash:header=x-user,connect=2000ms"`
	eventually(t, 10*time.Second, "access log line", func() error {
		if !strings.Contains(s.log.String(), want) {
			return fmt.Errorf("the access log lacks %s", want)
		}
		return nil
	})
}

// TestExamplesIngressPathNormalize: path-normalize matches the normalized path and hands it to
// the backend; base never decodes %2F, decode-and-merge-slashes does.
func TestExamplesIngressPathNormalize(t *testing.T) {
	base, _, _ := startIngressExample(t)
	cases := []struct {
		host, path string
		status     int
		backend    string
		upstream   string // the backend's decoded r.URL.Path
	}{
		{"merge.example.test", "//api//v1", 200, "api", "/api/v1"},
		{"merge.example.test", "/x/../api", 200, "api", "/api"},
		{"merge.example.test", "/%61pi/x", 200, "api", "/api/x"},
		{"merge.example.test", "/apix", 200, "default", ""}, // no rule: the app Ingress's defaultBackend
		{"base.example.test", "/files/a%2F..%2Fb", 200, "exact", "/files/a/../b"},
		{"base.example.test", "/files/a/../../etc", 200, "default", ""}, // "/etc": not under /files
		{"decode.example.test", "/files/x%2F..%2Fb", 200, "exact", "/files/b"},
		{"decode.example.test", "/files/..%2F..%2Fetc", 200, "default", ""},
		{"decode.example.test", `/files\\a`, 200, "exact", "/files/a"},
		// Without the annotation the path is matched as it came: "//api" is not under /api.
		{"app.example.com", "//api", 200, "wild", "//api"},
	}
	for _, c := range cases {
		res := expectStatus(t, base, c.host, c.path, nil, c.status, c.backend)
		if c.upstream != "" && (res.echo == nil || res.echo.Path != c.upstream) {
			t.Errorf("%s%s reached the backend as %+v, want %s", c.host, c.path, res.echo, c.upstream)
		}
	}
}

// TestExamplesIngressClientTLS: auth-tls-secret checks client certificates in the handshake for
// the Ingress's TLS host, against the CA in the Secret's ca.crt; its paths answer 503 over HTTP.
func TestExamplesIngressClientTLS(t *testing.T) {
	base, httpsPort, _ := startIngressExample(t)
	ca, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", "demo-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	client := func(who string) *http.Client {
		cfg := &tls.Config{RootCAs: roots, ServerName: "mtls.example.com"}
		if who != "" {
			dir := filepath.Join("..", "..", "examples", "mtls", "certs")
			cert, err := tls.LoadX509KeyPair(filepath.Join(dir, who+".crt"), filepath.Join(dir, who+".key"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	var body []byte
	get := func(c *http.Client) (int, error) {
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/", httpsPort), nil)
		req.Host = "mtls.example.com"
		req.Header.Set("ssl-client-cert", "forged")
		res, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		body, _ = io.ReadAll(res.Body)
		_ = res.Body.Close()
		return res.StatusCode, nil
	}
	eventually(t, 10*time.Second, "alice", func() error {
		if code, err := get(client("alice")); err != nil || code != http.StatusOK {
			return fmt.Errorf("status %d, %v", code, err)
		}
		return nil
	})
	// auth-tls-pass-certificate-to-upstream: alice's certificate, not the client's forged copy.
	alice, err := os.ReadFile(filepath.Join("..", "..", "examples", "mtls", "certs", "alice.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(alice)
	var e echo
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not an echo: %s", body)
	}
	if h := e.Headers["Ssl-Client-Cert"]; len(h) != 1 || h[0] != escapedPEM(block.Bytes) {
		t.Errorf("ssl-client-cert %q, want alice's certificate", h)
	}
	for _, who := range []string{"", "mallory"} {
		if code, err := get(client(who)); err == nil {
			t.Errorf("client %q: status %d, want a failed handshake", who, code)
		}
	}
	// The app Ingress's own HTTPS host asks for no certificate.
	c := client("")
	c.Transport.(*http.Transport).TLSClientConfig.ServerName = "app.example.com"
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/api", httpsPort), nil)
	req.Host = "app.example.com"
	if res, err := c.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("app.example.com without a certificate: %v %v", res, err)
	} else {
		_ = res.Body.Close()
	}
	expectStatus(t, base, "mtls.example.com", "/", nil, http.StatusServiceUnavailable, "")
}
