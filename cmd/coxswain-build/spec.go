package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// coxswainModule is the module every distribution is built on.
const coxswainModule = "github.com/coxswain-labs/coxswain"

// zeroVersion is what a replaced requirement names: the replace decides what is built.
const zeroVersion = "v0.0.0-00010101000000-000000000000"

// with is one --with: a Go package (or a module's root package) to compile in, from a module at
// a version or in a local directory.
type with struct {
	path    string // as given: a module path or a package path inside one
	version string // empty: latest (no meaning with dir)
	dir     string // absolute module root, or empty
	module  string // the module path, known up front only for a local dir
}

// parseWith reads MODULE_PATH[@VERSION][=LOCAL_DIR].
func parseWith(spec string) (with, error) {
	var w with
	rest, dir, hasDir := strings.Cut(spec, "=")
	w.path, w.version, _ = strings.Cut(rest, "@")
	if w.path == "" || strings.ContainsAny(w.path, " \t") {
		return w, fmt.Errorf("--with %q: want MODULE_PATH[@VERSION][=LOCAL_DIR]", spec)
	}
	if !hasDir {
		return w, nil
	}
	if dir == "" {
		return w, fmt.Errorf("--with %q: empty LOCAL_DIR", spec)
	}
	if w.version != "" {
		return w, fmt.Errorf("--with %q: a version and a local directory exclude each other", spec)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return w, err
	}
	mod, err := modulePath(filepath.Join(abs, "go.mod"))
	if err != nil {
		return w, fmt.Errorf("--with %s=%s: %w", w.path, dir, err)
	}
	if w.path != mod && !strings.HasPrefix(w.path, mod+"/") {
		return w, fmt.Errorf("--with %s=%s: that directory holds module %s, which does not contain package %s", w.path, dir, mod, w.path)
	}
	w.dir, w.module = abs, mod
	return w, nil
}

// modulePath reads the module line of a go.mod file.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", fmt.Errorf("no Go module there: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s has no module line", gomod)
}

// findCoxswain walks up from dir to the coxswain source tree, the default for --coxswain.
func findCoxswain(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if mod, err := modulePath(filepath.Join(d, "go.mod")); err == nil && mod == coxswainModule {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("not inside the coxswain source tree: say which coxswain to build on with --coxswain DIR|VERSION")
		}
	}
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}
