package main

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	tinyPkg = "example.com/tiny/stamp"
	stock   = "github.com/coxswain-labs/coxswain/modules/"
)

// TestBuild runs real builds against the fixture modules in testdata: from a local directory,
// and from a module proxy (a file:// one this test writes, serving example.com/tiny v1.0.0).
// Builds are slow, so the cases that need a binary share two (a full and a proxy-only one) and
// the error cases are proxy-only builds or fail before building.
func TestBuild(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	// The version follows the fixture's content: the module cache keeps what it once fetched for
	// a version, and an edited fixture must not meet a stale copy there.
	tinyVersion := contentVersion(t, "testdata/tiny")
	t.Setenv("GOPROXY", "file://"+fileProxy(t, "example.com/tiny", tinyVersion, "testdata/tiny"))
	t.Setenv("GOSUMDB", "off") // the fixture is in no checksum database
	t.Setenv("GOFLAGS", "-mod=mod")
	bin := t.TempDir()

	t.Run("full, local --with, --without", func(t *testing.T) {
		out := filepath.Join(bin, "full")
		log := build(t, 0, "--with", tinyPkg+"=testdata/tiny", "--without", stock+"udproute", "--output", out)
		mods := listModules(t, out)
		for _, want := range []string{"filter.http.tiny_stamp", "translate.filter.tiny_stamp", "route.http", "translate.route.http"} {
			if !mods[want] {
				t.Errorf("%s is missing from %v", want, mods)
			}
		}
		if mods["route.udp"] || mods["translate.route.udp"] {
			t.Errorf("--without udproute left route.udp or its controller half in: %v", mods)
		}
		if !strings.Contains(log, "filter.http.tiny_stamp") || !strings.Contains(log, "go build") {
			t.Errorf("the progress lines miss the build or the module list:\n%s", log)
		}
	})

	t.Run("proxy-only, --with at a version", func(t *testing.T) {
		out := filepath.Join(bin, "proxy")
		build(t, 0, "--proxy-only", "--with", tinyPkg+"@"+tinyVersion, "--output", out)
		mods := listModules(t, out)
		if !mods["filter.http.tiny_stamp"] || !mods["route.http"] {
			t.Errorf("modules %v", mods)
		}
		if mods["translate.filter.tiny_stamp"] {
			t.Error("the proxy-only build has the --with package's controller half")
		}
		deps, err := exec.Command("go", "version", "-m", out).Output()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(deps, []byte("example.com/tiny\t"+tinyVersion)) {
			t.Errorf("example.com/tiny %s is not in the binary:\n%s", tinyVersion, deps)
		}
		for _, line := range strings.Split(string(deps), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "dep" &&
				(strings.HasPrefix(f[1], "k8s.io/") || strings.HasPrefix(f[1], "sigs.k8s.io/")) {
				t.Errorf("the proxy-only build links %s", f[1])
			}
		}
		for id := range mods {
			if strings.HasPrefix(id, "translate.") {
				t.Errorf("the proxy-only build has the controller-side module %s", id)
			}
		}
	})

	errorCases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "unknown module path", args: []string{"--with", "example.com/nope"}, code: 1,
			want: "--with example.com/nope: unknown module path"},
		{name: "version does not resolve", args: []string{"--with", tinyPkg + "@v9.9.9"}, code: 1,
			want: "--with example.com/tiny/stamp@v9.9.9: version v9.9.9 does not resolve"},
		{name: "package registers no module", args: []string{"--with", "example.com/empty/nothing=testdata/empty"}, code: 1,
			want: "--with example.com/empty/nothing: the package registers no module"},
		{name: "two packages register one ID",
			args: []string{"--with", "example.com/dup/a=testdata/dup", "--with", "example.com/dup/b=testdata/dup"}, code: 1,
			want: "two packages register module filter.http.dup: example.com/dup/"},
		{name: "no such package in a local module", args: []string{"--with", "example.com/tiny/nope=testdata/tiny"}, code: 1,
			want: "--with example.com/tiny/nope: no such package in module example.com/tiny"},
		{name: "--without a package not in the stock list", args: []string{"--without", "example.com/x"}, code: 1,
			want: "--without example.com/x: not a stock package"},
		{name: "local dir holding another module", args: []string{"--with", "example.com/other=testdata/tiny"}, code: 2,
			want: "holds module example.com/tiny, which does not contain package example.com/other"},
	}
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(bin, "err")
			log := build(t, tc.code, append([]string{"--proxy-only", "--output", out}, tc.args...)...)
			if !strings.Contains(log, tc.want) {
				t.Errorf("the output does not say %q:\n%s", tc.want, log)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed build left %s behind", out)
			}
		})
	}
}

// build runs the builder in-process and checks its exit code; it returns what it printed.
func build(t *testing.T, code int, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if got := run(context.Background(), args, &out); got != code {
		t.Fatalf("exit %d, want %d:\n%s", got, code, out.String())
	}
	return out.String()
}

// listModules runs the built binary's list-modules.
func listModules(t *testing.T, bin string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "list-modules").Output()
	if err != nil {
		t.Fatalf("%s list-modules: %v", bin, err)
	}
	mods := map[string]bool{}
	for _, id := range strings.Fields(string(out)) {
		mods[id] = true
	}
	return mods
}

// contentVersion is v1.0.N, N a hash of the files under dir.
func contentVersion(t *testing.T, dir string) string {
	t.Helper()
	h := fnv.New32a()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		_, _ = h.Write([]byte(path))
		_, _ = h.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("v1.0.%d", h.Sum32())
}

// fileProxy writes a GOPROXY directory serving module mod at version from dir, and returns it.
func fileProxy(t *testing.T, mod, version, dir string) string {
	t.Helper()
	root := t.TempDir()
	at := filepath.Join(root, filepath.FromSlash(mod), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var zipped bytes.Buffer
	zw := zip.NewWriter(&zipped)
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		w, err := zw.Create(mod + "@" + version + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil {
			_, err = w.Write(data)
		}
		return err
	})
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(`{"Version":"` + version + `","Time":"2026-01-01T00:00:00Z"}`),
		version + ".mod":  gomod,
		version + ".zip":  zipped.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
