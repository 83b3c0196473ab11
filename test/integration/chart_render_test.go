package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The Helm charts are what users install (docs/install.md): deploy/ keeps only the CRDs they are
// copied from. The tests render them with the pinned helm (`make helm` puts it in .tools/bin;
// $HELM overrides) as release "coxswain" in coxswain-system, the names the rest of this package's
// RBAC checks use.
const (
	chartDir     = "../../charts/coxswain"
	crdsChartDir = "../../charts/coxswain-crds"
	releaseName  = "coxswain"
)

// helmBinary is the helm the Makefile installs. Missing helm fails the test: it is part of what
// `make test` installs, and a skipped chart check would hide a broken chart.
func helmBinary(t testing.TB) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := filepath.Abs("../../.tools/bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(h); err != nil {
		t.Fatalf("helm is not installed at %s (run `make helm`, or set $HELM): %v", h, err)
	}
	return h
}

// runHelm runs helm and returns its stdout; a failure or anything on stderr (helm prints warnings
// there) fails the test.
func runHelm(t testing.TB, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No user configuration or repositories leak into the test.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Errorf("helm %s wrote to stderr:\n%s", strings.Join(args, " "), s)
	}
	return stdout.Bytes()
}

// renderChart is `helm template` of a chart for a cluster of kubeVersion; extra are more flags
// (-f values files, --set, --include-crds).
func renderChart(t testing.TB, dir, kubeVersion string, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	args := append([]string{"template", releaseName, dir, "--namespace", controllerNS, "--kube-version", kubeVersion}, extra...)
	objs, err := decodeYAML(bytes.NewReader(runHelm(t, args...)), "helm template "+dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("helm template %s %v rendered nothing", dir, extra)
	}
	return objs
}

func decodeYAML(r io.Reader, name string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func objectID(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// sameFiles fails the test unless dir holds exactly the files of want (base name -> source path),
// byte for byte: the charts' copies of deploy/ and of the Gateway API module (`make generate`).
func sameFiles(t testing.TB, dir string, want map[string]string) {
	t.Helper()
	got, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range got {
		base := filepath.Base(g)
		seen[base] = true
		src, ok := want[base]
		if !ok {
			t.Errorf("%s: no such file in its source; run `make generate`", g)
			continue
		}
		a, _ := os.ReadFile(g)
		b, err := os.ReadFile(src)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s; run `make generate` (%v)", g, src, err)
		}
	}
	for base, src := range want {
		if !seen[base] {
			t.Errorf("%s has no copy in %s; run `make generate`", src, dir)
		}
	}
}

func filesByBase(t testing.TB, glob string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(glob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no files match %s: %v", glob, err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[filepath.Base(f)] = f
	}
	return out
}
