package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startHeaderEcho answers with its request headers as JSON, lower-cased, the way
// examples/quickstart/echo does as far as examples/mtls relies on it.
func startHeaderEcho(t *testing.T) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := map[string]string{}
		for k, v := range r.Header {
			h[strings.ToLower(k)] = strings.Join(v, ", ")
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"backend": "app", "headers": h})
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// TestExamplesMTLSTry runs examples/mtls/try.sh --run against `coxswain serve -f examples/mtls`:
// a client certificate of the right CA gets through with its subject, none or another CA's is
// refused on the strict port and let through without a subject on the fallback port, and a
// forged subject header never reaches the backend.
func TestExamplesMTLSTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	clients, partners := freePort(t), freePort(t)
	files := exampleFiles(t, "mtls", map[string]int{"port: 8443": clients, "port: 8444": partners, "port: 9371": startHeaderEcho(t)})
	startServe(t, files)
	eventually(t, 10*time.Second, "examples/mtls served", func() error {
		out, err := exec.Command("curl", "-s", "-k", "-o", "/dev/null", "-w", "%{http_code}",
			fmt.Sprintf("https://127.0.0.1:%d/", partners)).Output()
		if err != nil || string(out) != "200" {
			return fmt.Errorf("GET partners /: %s %v", out, err)
		}
		return nil
	})
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "examples", "mtls", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), fmt.Sprintf("MTLS_CLIENTS=https://localhost:%d", clients),
		fmt.Sprintf("MTLS_PARTNERS=https://localhost:%d", partners))
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, raw)
	}
	out := string(raw)
	// The subject lines, in the order of the commands: alice twice on the strict port (the
	// forged header replaced), mallory on the fallback port, nobody else.
	var subjects []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, `"x-client-subject"`) {
			subjects = append(subjects, strings.TrimSpace(line))
		}
	}
	want := []string{`"x-client-subject": "CN=alice,O=acme",`, `"x-client-subject": "CN=alice,O=acme",`,
		`"x-client-subject": "CN=mallory,O=partner corp",`}
	if strings.Join(subjects, "\n") != strings.Join(want, "\n") {
		t.Errorf("subjects the backend saw:\n%s\nwant:\n%s\nfull output:\n%s", strings.Join(subjects, "\n"), strings.Join(want, "\n"), out)
	}
	if strings.Contains(out, "CN=admin\"") {
		t.Errorf("a forged subject reached the backend:\n%s", out)
	}
	// Both refused handshakes on the strict port answer no HTTP status; the fallback port
	// served all three of its clients.
	if n := strings.Count(out, "\n000\n"); n != 2 {
		t.Errorf("%d refused requests, want 2:\n%s", n, out)
	}
	if n := strings.Count(out, `"backend": "app"`); n != 5 {
		t.Errorf("%d requests served, want 5:\n%s", n, out)
	}
}
