package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// EnvBinDir names a directory holding prebuilt coxswain, echo-basic and dnsresponder binaries
// (run.sh builds them there); a binary missing from it is built by the test.
const EnvBinDir = "COXSWAIN_CONFORMANCE_BIN"

// Binaries are the programs of a run besides the control plane.
type Binaries struct {
	Coxswain     string // the product: cmd/coxswain of the main module
	EchoBasic    string // sigs.k8s.io/gateway-api/conformance/echo-basic
	DNSResponder string // ./cmd/dnsresponder, the coredns stand-in
}

// moduleDir is test/conformance: the harness's own module.
func moduleDir(t testing.TB) string {
	t.Helper()
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Dir(filepath.Dir(file))
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("cannot find the test/conformance module (go env GOMOD: %v)", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// RepoDir is the main module's directory.
func RepoDir(t testing.TB) string { return filepath.Clean(filepath.Join(moduleDir(t), "..", "..")) }

// binaries returns the binaries from EnvBinDir, building the missing ones into a temp dir. The
// build runs inside the private network namespace: the module cache must already hold every
// dependency (GOPROXY=off fails fast otherwise; run.sh downloads them first).
func binaries(t testing.TB) Binaries {
	t.Helper()
	dir := os.Getenv(EnvBinDir)
	if dir == "" {
		dir = t.TempDir()
	}
	mod, repo := moduleDir(t), RepoDir(t)
	b := Binaries{
		Coxswain:     filepath.Join(dir, "coxswain"),
		EchoBasic:    filepath.Join(dir, "echo-basic"),
		DNSResponder: filepath.Join(dir, "dnsresponder"),
	}
	for _, x := range []struct{ out, wd, pkg string }{
		{b.Coxswain, repo, "./cmd/coxswain"},
		{b.EchoBasic, mod, "sigs.k8s.io/gateway-api/conformance/echo-basic"},
		{b.DNSResponder, mod, "./cmd/dnsresponder"},
	} {
		if _, err := os.Stat(x.out); err == nil {
			continue
		}
		cmd := exec.Command("go", "build", "-o", x.out, x.pkg)
		cmd.Dir = x.wd
		cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", x.pkg, err, out)
		}
	}
	return b
}
