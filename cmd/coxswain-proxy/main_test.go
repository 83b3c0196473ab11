package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const self = "github.com/coxswain-labs/coxswain/cmd/coxswain-proxy"

func needGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
}

// TestNoKubernetesInClosure: the proxy-only binary, and package proxycmd that any proxy-only
// distribution is built on, link no Kubernetes, client-go or Gateway API package.
func TestNoKubernetesInClosure(t *testing.T) {
	needGo(t)
	out, err := exec.Command("go", "list", "-deps", self, "github.com/coxswain-labs/coxswain/cmd/proxycmd").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 || !slices.Contains(deps, "github.com/coxswain-labs/coxswain/core/proxy") {
		t.Fatalf("go list -deps looks wrong (%d packages)", len(deps))
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "sigs.k8s.io/") {
			t.Errorf("the proxy-only closure holds %s", d)
		}
	}
}

// TestBinary builds the binary and runs its list-modules and version.
func TestBinary(t *testing.T) {
	needGo(t)
	bin := filepath.Join(t.TempDir(), "coxswain-proxy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "list-modules").Output()
	if err != nil {
		t.Fatalf("list-modules: %v", err)
	}
	mods := strings.Fields(string(out))
	if !slices.Contains(mods, "route.http") || !slices.Contains(mods, "listener.tls") {
		t.Errorf("list-modules = %v, want the stock proxy modules", mods)
	}
	for _, m := range mods {
		if strings.HasPrefix(m, "translate.") {
			t.Errorf("list-modules has the controller-side module %s", m)
		}
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "coxswain ") {
		t.Errorf("version: %q, %v", out, err)
	}
	out, err = exec.Command(bin, "serve", "-f", ".").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "not in a proxy-only build") {
		t.Errorf("serve: %v\n%s", err, out)
	}
}
