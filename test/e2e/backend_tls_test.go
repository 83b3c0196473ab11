package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startBackendTLSEcho serves what examples/quickstart/echo serves with -tls-cert, -tls-key and
// -client-ca examples/backend-tls/certs/...: HTTPS with the example's backend certificate, a
// client certificate of the example's CA required, and the handshake's SNI and client subject in
// the JSON reply. hits counts the requests that got through the handshake.
func startBackendTLSEcho(t *testing.T, hits *atomic.Int64) int {
	t.Helper()
	certs := filepath.Join("..", "..", "examples", "backend-tls", "certs")
	pair, err := tls.LoadX509KeyPair(filepath.Join(certs, "backend.crt"), filepath.Join(certs, "backend.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		type tlsInfo struct {
			SNI    string `json:"sni"`
			Client string `json:"clientCertificate,omitempty"`
		}
		info := tlsInfo{SNI: r.TLS.ServerName}
		if len(r.TLS.PeerCertificates) > 0 {
			info.Client = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		b, _ := json.MarshalIndent(map[string]any{"backend": "secure", "path": r.URL.Path, "tls": info}, "", "  ")
		_, _ = w.Write(append(b, '\n'))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// TestExamplesBackendTLSTry runs examples/backend-tls/try.sh --run against `coxswain serve -f
// examples/backend-tls` and a TLS backend that requires a client certificate: the good policies
// reach it with the right SNI and the Gateway's certificate, the wrong name, the wrong SAN and
// the missing CA are refused before any request reaches it.
func TestExamplesBackendTLSTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	var hits atomic.Int64
	port := freePort(t)
	backend := startBackendTLSEcho(t, &hits)
	startServe(t, exampleFiles(t, "backend-tls", map[string]int{"port: 8098": port, "port: 9361": backend}))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "examples/backend-tls served", func() error {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", base+"/secure").Output()
		if err != nil || string(out) != "200" {
			return fmt.Errorf("GET /secure: %s %v", out, err)
		}
		return nil
	})
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	before := hits.Load()
	cmd := exec.Command("bash", filepath.Join(root, "examples", "backend-tls", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), "TLS_BASE="+base, "COXSWAIN="+binary)
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, raw)
	}
	out := string(raw)
	for _, want := range []string{
		`"sni": "secure.backend.internal"`,
		`"clientCertificate": "coxswain-gateway"`,
		"/spiffe\n200\n",
		"/wrong-name\n502\n",
		"/wrong-san\n502\n",
		"/broken\n502\n",
		"NoValidCACertificate",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("try.sh --run output lacks %q:\n%s", want, out)
		}
	}
	// Only /secure and /spiffe passed the handshake.
	if n := hits.Load() - before; n != 2 {
		t.Errorf("the backend answered %d requests, want 2", n)
	}
}
