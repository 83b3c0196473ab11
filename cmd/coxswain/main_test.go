package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/cmd/coxswaincmd"
	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	"github.com/coxswain-labs/coxswain/core"
)

func runWith(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = coxswaincmd.Run(args, &proxycmd.Env{Reg: core.Freeze(), Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), code
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.yaml")
	if err := os.WriteFile(valid, []byte(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec: {controllerName: coxswain-labs.dev/gateway-controller}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	invalid := filepath.Join(dir, "invalid.yaml")
	if err := os.WriteFile(invalid, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {bogus: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{name: "no command", args: nil, code: 2, stderr: "Usage: coxswain"},
		{name: "help", args: []string{"help"}, code: 0, stdout: "serve -f PATH"},
		{name: "unknown command", args: []string{"nope"}, code: 2, stderr: `unknown command "nope"`},
		{name: "list-modules", args: []string{"list-modules"}, code: 0, stdout: "route.http\n"},
		{name: "list-modules --packages names the controller halves", args: []string{"list-modules", "--packages"}, code: 0,
			stdout: "translate.route.http github.com/coxswain-labs/coxswain/modules/httproute/translate\n"},
		{name: "list-modules rejects arguments", args: []string{"list-modules", "x"}, code: 2, stderr: "unexpected arguments"},
		{name: "version", args: []string{"version"}, code: 0, stdout: "coxswain "},
		{name: "serve needs -f", args: []string{"serve"}, code: 2, stderr: "missing -f PATH"},
		{name: "serve rejects a bad log format", args: []string{"serve", "-f", dir, "--log-format", "xml"}, code: 2, stderr: "--log-format"},
		{name: "serve help", args: []string{"serve", "-h"}, code: 0, stderr: "-admin-address"},
		{name: "validate valid", args: []string{"validate", "-f", valid}, code: 0, stdout: "gatewayClasses:", stderr: "valid:"},
		{name: "validate json", args: []string{"validate", "-o", "json", "-f", valid}, code: 0, stdout: `"gatewayClasses": [`},
		{name: "validate invalid", args: []string{"validate", "-f", invalid}, code: 1, stdout: "UnknownField", stderr: "spec.bogus"},
		{name: "validate missing path", args: []string{"validate", "-f", filepath.Join(dir, "nope")}, code: 1, stderr: "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runWith(tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
		})
	}
}

func TestListModulesSorted(t *testing.T) {
	out, _, _ := runWith("list-modules")
	ids := strings.Split(strings.TrimSpace(out), "\n")
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			t.Fatalf("not sorted: %q before %q", ids[i-1], ids[i])
		}
	}
}

// TestControllerMemoryLimitFlag: the controller takes --memory-limit as the proxy does, and a
// value that is not a size stops it before it starts anything.
func TestControllerMemoryLimitFlag(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	_, stderr, code := runWith("controller", "--memory-limit", "lots")
	if code != 2 || !strings.Contains(stderr, "--memory-limit") {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
}
