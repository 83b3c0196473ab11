package standard_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/standard"
)

const bundle = "github.com/coxswain-labs/coxswain/modules/standard"

// TestStockModules checks the modules the stock distribution promises are compiled in.
func TestStockModules(t *testing.T) {
	reg := core.Freeze()
	for _, id := range []core.ModuleID{
		"filter.ext.gateway.coxswain-labs.dev.BasicAuth",
		"filter.ext.gateway.coxswain-labs.dev.Compression",
		"filter.ext.gateway.coxswain-labs.dev.CoxswainExternalAuth",
		"filter.ext.gateway.coxswain-labs.dev.IpAccessControl",
		"filter.ext.gateway.coxswain-labs.dev.PathRewriteRegex",
		"filter.ext.gateway.coxswain-labs.dev.RequestSizeLimit",
		"filter.http.client_ip",
		"filter.http.cors",
		"filter.http.path_normalize",
		"filter.http.request_header_modifier",
		"filter.http.request_mirror",
		"filter.http.request_redirect",
		"filter.http.response_header_modifier",
		"filter.http.url_rewrite",
		"lb.ewma",
		"lb.hash",
		"lb.least_conn",
		"lb.round_robin",
		"listener.http",
		"listener.http3",
		"listener.https",
		"listener.tcp",
		"listener.tls",
		"listener.udp",
		"route.grpc",
		"route.http",
		"route.tcp",
		"route.tls",
		"route.udp",
	} {
		if !reg.Has(id) {
			t.Errorf("stock module %s is missing", id)
		}
	}
	t.Logf("stock modules: %v", reg.IDs())
	// Every stock ExtensionRef filter declares the resource the controller must watch for it.
	exts, errs := reg.Extensions()
	for _, err := range errs {
		t.Error(err)
	}
	if len(exts) == 0 {
		t.Error("no stock filter.ext.* module declares an ExtensionAPI")
	}
}

// goList runs `go list` with args, or skips the test without a go tool.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not found")
	}
	out, err := exec.Command(gobin, append([]string{"list"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestPackagesMatchImports keeps the builder's list equal to what the bundle really imports.
func TestPackagesMatchImports(t *testing.T) {
	imports := strings.Fields(goList(t, "-f", `{{join .Imports " "}}`, bundle))
	want := slices.Sorted(slices.Values(standard.Packages))
	if !slices.Equal(imports, want) {
		t.Errorf("standard.go imports %v\nbut Packages lists %v", imports, want)
	}
}

// TestNoKubernetes keeps the bundle importable by a proxy-only build.
func TestNoKubernetes(t *testing.T) {
	for _, pkg := range strings.Fields(goList(t, "-deps", bundle)) {
		for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "go.uber.org/fx"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("the stock bundle depends on %s", pkg)
			}
		}
	}
}
