package e2e

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCLI(t *testing.T) {
	t.Run("list-modules", func(t *testing.T) {
		out, _, code := runCLI(t, "list-modules")
		ids := strings.Fields(out)
		if code != 0 || !sort.StringsAreSorted(ids) {
			t.Fatalf("exit %d, output %q", code, out)
		}
		for _, want := range []string{"route.http", "translate.route.http", "lb.round_robin", "listener.http", "listener.https",
			"filter.http.request_header_modifier", "filter.http.response_header_modifier", "filter.http.request_redirect", "filter.http.url_rewrite"} {
			if !strings.Contains("\n"+out, "\n"+want+"\n") {
				t.Errorf("list-modules lacks %s:\n%s", want, out)
			}
		}
	})
	t.Run("version", func(t *testing.T) {
		out, _, code := runCLI(t, "version")
		if code != 0 || !strings.HasPrefix(out, "coxswain ") {
			t.Errorf("exit %d, output %q", code, out)
		}
	})
	t.Run("unknown command", func(t *testing.T) {
		if _, errOut, code := runCLI(t, "frobnicate"); code != 2 || !strings.Contains(errOut, "unknown command") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
	t.Run("validate the quickstart", func(t *testing.T) {
		out, errOut, code := runCLI(t, "validate", "-f", filepath.Join("..", "..", "examples", "quickstart"))
		if code != 0 || !strings.Contains(out, "gatewayClasses:") || !strings.Contains(errOut, "valid:") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})
	t.Run("validate invalid manifests", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "gw.yaml"), gatewayClassYAML+"---\n"+gatewayYAML(listener{name: "http", protocol: "HTTP", port: 8080}))
		writeFile(t, filepath.Join(dir, "route.yaml"), routeYAML("r", "", `  rules:
  - backendRefs: [{name: missing, port: 80}]
`))
		writeFile(t, filepath.Join(dir, "bad.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {portz: []}\n")
		out, errOut, code := runCLI(t, "validate", "-f", dir)
		if code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		for _, want := range []string{"bad.yaml", "spec.portz", "route.yaml", "HTTPRoute default/r", "ResolvedRefs=False"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr lacks %q:\n%s", want, errOut)
			}
		}
		if !strings.Contains(out, "BackendNotFound") {
			t.Errorf("the status should show BackendNotFound:\n%s", out)
		}
	})
}
