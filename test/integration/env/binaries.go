package env

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// paths says where build.sh and its output live.
type paths struct {
	repo   string
	script string
	binDir string
}

// locate finds build.sh next to this source file, or through the main
// module's go.mod when the test binary was built with -trimpath.
func locate() (paths, error) {
	var dir string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir = filepath.Dir(file)
	}
	if dir == "" || !exists(filepath.Join(dir, "build.sh")) {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		gomod := strings.TrimSpace(string(out))
		if err != nil || gomod == "" || gomod == os.DevNull {
			return paths{}, fmt.Errorf("cannot find test/integration/env/build.sh (go env GOMOD: %q, %v)", gomod, err)
		}
		dir = filepath.Join(filepath.Dir(gomod), "test", "integration", "env")
	}
	p := paths{
		repo:   filepath.Clean(filepath.Join(dir, "..", "..", "..")),
		script: filepath.Join(dir, "build.sh"),
	}
	p.binDir = os.Getenv(EnvBinDir)
	if p.binDir == "" {
		p.binDir = filepath.Join(p.repo, ".cache", "k8s-bin")
	}
	return p, nil
}

// ensureBinaries asks build.sh whether the pinned binaries are in place;
// build.sh owns the versions and stamps, so they are written down once.
func ensureBinaries(t testing.TB, p paths) {
	t.Helper()
	var out bytes.Buffer
	check := buildCmd(p, "--check")
	check.Stdout, check.Stderr = &out, &out
	err := check.Run()
	if err == nil {
		return
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("integration env: running %s --check: %v\n%s", p.script, err, out.String())
	}
	if os.Getenv(EnvBuild) == "1" {
		t.Logf("integration env: %s; %s=1, so building now (cold: ~11 min on 2 cores)",
			strings.TrimSpace(out.String()), EnvBuild)
		build := buildCmd(p)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			t.Fatalf("integration env: %s failed: %v", p.script, err)
		}
		return
	}
	t.Fatalf(`integration env: %s
The integration tests run a real etcd and kube-apiserver built from Go modules.
Build them once (about 11 min cold on 2 cores; later runs reuse them):

    bash %s

Or let the test build them:  %s=1 go test -timeout 30m ./test/integration/...
Or skip integration tests:   %s=1 go test ...`,
		strings.TrimSpace(out.String()), p.script, EnvBuild, EnvSkip)
}

func buildCmd(p paths, args ...string) *exec.Cmd {
	cmd := exec.Command("bash", append([]string{p.script}, args...)...)
	cmd.Dir = p.repo
	cmd.Env = append(os.Environ(), EnvBinDir+"="+p.binDir)
	return cmd
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
