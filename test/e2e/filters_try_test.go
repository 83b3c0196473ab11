package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExamplesFiltersTry runs examples/filters/try.sh --run against `coxswain serve -f
// examples/filters`, as a newcomer would, and checks that every filter kind answers as the
// script's comments say.
func TestExamplesFiltersTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	port := freePort(t)
	srv := startServe(t, exampleFiles(t, "filters", map[string]int{"port: 8090": port, "port: 9331": startBackend(t, "app").port}))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "examples/filters served", func() error {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", base+"/legacy/users/7").Output()
		if err != nil || string(out) != "200" {
			return fmt.Errorf("GET /legacy/users/7: %s %v", out, err)
		}
		return nil
	})
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	s := srv
	cmd := exec.Command("bash", filepath.Join(root, "examples", "filters", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), "FILTERS_BASE="+base, "COXSWAIN="+binary)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, out)
	}
	// Headers in Go's canonical case, the test backend's compact JSON: compare in lower case
	// with whitespace squeezed.
	got := strings.ToLower(strings.Join(strings.Fields(string(out)), " "))
	for _, want := range []string{
		`"path":"/v2/users/7"`,        // PathRewriteRegex
		"200 200 200 200 200 429 429", // RateLimit: 5 per minute, then refused
		"retry-after:",
		"x-ratelimit-limit: 5",
		"allow-list 200 $ curl", // IpAccessControl: from 127.0.0.2 served...
		"allow-list 403",        // ...from 127.0.0.1 refused
		"401 200",               // BasicAuth
		"jwt/hello 401",         // JwtAuth without a token
		`"x-user-id":["alice"]`, // with one: the claim as a header
		"sizelimit 413",         // RequestSizeLimit
		"content-encoding: gzip",
		"vary: accept-encoding",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("try.sh --run output lacks %q:\n%s", want, out)
		}
	}
	// serve's /metrics: the example's missing PathRewriteRegex ("gone"), and the 429s above.
	metrics, code, err := s.adminGet("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	for _, want := range []string{`coxswain_filter_unresolved_total{kind="PathRewriteRegex"}`, `coxswain_ratelimit_rejected_total{ratelimit="default/per-client"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
