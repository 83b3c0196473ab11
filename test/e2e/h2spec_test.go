package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// h2specBinary finds h2spec through $COXSWAIN_H2SPEC, then .tools/bin (where `make test`
// installs the pinned version), then $PATH. Without it the test skips, unless
// COXSWAIN_REQUIRE_H2SPEC=1 makes that a failure.
func h2specBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("COXSWAIN_H2SPEC"); p != "" {
		return p
	}
	if p, err := filepath.Abs(filepath.Join("..", "..", ".tools", "bin", "h2spec")); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p, err := exec.LookPath("h2spec")
	if err == nil {
		return p
	}
	if os.Getenv("COXSWAIN_REQUIRE_H2SPEC") == "1" {
		t.Fatalf("h2spec not found ($COXSWAIN_H2SPEC, .tools/bin/h2spec, $PATH) and COXSWAIN_REQUIRE_H2SPEC=1: %v", err)
	}
	t.Skip("h2spec is not installed (make tools installs it into .tools/bin): skipping the HTTP/2 conformance run")
	return ""
}

var h2specSummary = regexp.MustCompile(`(\d+) tests, (\d+) passed, (\d+) skipped, (\d+) failed`)

// TestH2Spec runs h2spec, the HTTP/2 conformance suite (RFC 7540/9113 and HPACK), in full
// against the real binary's HTTPS listener (ALPN h2) and its cleartext listener (h2c with prior
// knowledge), routed to a real backend. Every case must pass.
func TestH2Spec(t *testing.T) {
	bin := h2specBinary(t)
	be := startBackend(t, "h2spec")
	httpPort, httpsPort := freePort(t), freePort(t)
	cert, key := selfSigned(t, "h2spec.example")
	files := map[string]string{
		"gc.yaml":     gatewayClassYAML,
		"secret.yaml": tlsSecretYAML("cert", cert, key),
		"gw.yaml":     gatewayYAML(listener{name: "http", protocol: "HTTP", port: httpPort}, listener{name: "https", protocol: "HTTPS", port: httpsPort, certSecret: "cert"}),
		"svc.yaml":    serviceYAML(be),
		"route.yaml":  routeYAML("all", "", "  rules: [{backendRefs: [{name: h2spec, port: 80}]}]\n"),
	}
	startServe(t, files) // the default inbound HTTP/2 server is the own one
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"h2c", []string{"-p", strconv.Itoa(httpPort)}},
		{"https", []string{"-p", strconv.Itoa(httpsPort), "-t", "-k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			args := append([]string{"-h", "127.0.0.1", "-o", "5", "-j", filepath.Join(t.TempDir(), "report.xml")}, tc.args...)
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			m := h2specSummary.FindSubmatch(out)
			if m == nil {
				t.Fatalf("h2spec %v: no summary (%v):\n%s", args, err, out)
			}
			t.Logf("h2spec %s: %s", tc.name, m[0])
			if string(m[4]) != "0" || err != nil {
				t.Fatalf("h2spec %v failed (%v):\n%s", args, err, out)
			}
			if m[1] != nil && string(m[2]) != string(m[1]) {
				t.Fatalf("h2spec %v: not every case passed: %s", args, fmt.Sprint(string(m[0])))
			}
		})
	}
}
