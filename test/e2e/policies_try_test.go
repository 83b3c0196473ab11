package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// startDemoAuth serves what examples/policies/authserver serves: 200 with X-Auth-User for
// "Authorization: Bearer demo-token-alice", else 401 with a challenge and a JSON body.
func startDemoAuth(t *testing.T) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer demo-token-alice" {
			w.Header().Set("X-Auth-User", "alice")
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="coxswain-demo"`)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, "{\"error\":\"a valid bearer token is required for %s %s\"}\n", r.Method, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// TestExamplesPoliciesTry runs examples/policies/try.sh --run against `coxswain serve -f
// examples/policies`: the Gateway-wide external auth, PROXY protocol on one listener and the
// trusted X-Forwarded-For hop on the other, each as the script's comments say.
func TestExamplesPoliciesTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	httpPort, proxiedPort := freePort(t), freePort(t)
	startServe(t, exampleFiles(t, "policies", map[string]int{
		"port: 8096": httpPort, "port: 8097": proxiedPort,
		"port: 9362": startBackend(t, "app").port, "port: 9361": startDemoAuth(t),
	}))
	httpBase, proxiedBase := fmt.Sprintf("http://127.0.0.1:%d", httpPort), fmt.Sprintf("http://127.0.0.1:%d", proxiedPort)
	eventually(t, 10*time.Second, "examples/policies served", func() error {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", httpBase+"/app/").Output()
		if err != nil || string(out) != "401" {
			return fmt.Errorf("GET /app/: %s %v", out, err)
		}
		return nil
	})
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "examples", "policies", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), "POLICIES_HTTP="+httpBase, "POLICIES_PROXIED="+proxiedBase, "COXSWAIN="+binary)
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, raw)
	}
	out := string(raw)
	lower := strings.ToLower(strings.Join(strings.Fields(out), " "))
	for _, want := range []string{
		"http/1.1 401",
		`www-authenticate: bearer realm="coxswain-demo"`,
		"a valid bearer token is required for get /app/",
		`"x-auth-user":["alice"]`,
		"applied to listener proxied of gateway default/policies",
		"applied to every httproute and grpcroute rule on gateway default/policies",
	} {
		if !strings.Contains(lower, want) {
			t.Errorf("try.sh --run output lacks %q:\n%s", want, out)
		}
	}
	// The status lines, in order: PROXY header served, none closed; trusted hop allowed, peer
	// refused.
	codes := regexp.MustCompile(`(?m)^\d{3}$`).FindAllString(out, -1)
	if want := []string{"200", "000", "200", "403"}; !slices.Equal(codes, want) {
		t.Errorf("status lines %v, want %v:\n%s", codes, want, out)
	}
}
