package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/samber/lo"

	"github.com/coxswain-labs/coxswain/cmd/internal/distro"
)

// options are the parsed command line.
type options struct {
	with      []with
	without   []string
	proxyOnly bool
	output    string
	coxswain  string // a directory or a version; empty: the source tree around the working directory
	offline   bool
	verbose   bool
	keep      bool
}

// builder builds one distribution in a temporary module.
type builder struct {
	opts   options
	dir    string   // the temporary module
	env    []string // added to every go command's environment
	stderr io.Writer
}

// build runs every step, printing progress; the error says which step failed and why.
func (b *builder) build(ctx context.Context) error {
	if err := b.writeGoMod(); err != nil {
		return err
	}
	if !isDir(b.opts.coxswain) {
		b.progress("go get %s@%s", coxswainModule, b.opts.coxswain)
		if _, err := b.goCmd(ctx, b.dir, "get", coxswainModule+"@"+b.opts.coxswain); err != nil {
			return fmt.Errorf("--coxswain %s: not a coxswain version that resolves: %w", b.opts.coxswain, err)
		}
	}
	for _, w := range b.opts.with {
		if err := b.resolve(ctx, w); err != nil {
			return err
		}
	}
	pkgs, err := b.packages(ctx)
	if err != nil {
		return err
	}
	if err := b.writeMain(pkgs); err != nil {
		return err
	}
	out, err := filepath.Abs(b.opts.output)
	if err != nil {
		return err
	}
	// -mod=mod, not `go mod tidy`: tidy also resolves the tests of every dependency (grpc's pull
	// in OpenTelemetry), which a build never needs and an offline module cache does not hold.
	b.progress("go build -mod=mod -o %s (%s)", out, runtime.Version())
	// No -trimpath: it would change every package's build-cache key, and the first build of a
	// distribution would recompile all of its dependencies instead of reusing the cache.
	if _, err := b.goCmd(ctx, b.dir, "build", "-mod=mod", "-o", out, "."); err != nil {
		return b.explainBuild(err)
	}
	return b.check(ctx, out)
}

func (b *builder) progress(format string, args ...any) {
	fmt.Fprintf(b.stderr, "coxswain-build: "+format+"\n", args...)
}

// writeGoMod writes the temporary module's go.mod: coxswain and every local --with replaced by
// its directory. A local coxswain's go.sum seeds the module's, so its dependencies verify from
// the module cache without the checksum database.
func (b *builder) writeGoMod() error {
	var req, repl strings.Builder
	cox := b.opts.coxswain
	if isDir(cox) {
		abs, err := filepath.Abs(cox)
		if err != nil {
			return err
		}
		if mod, err := modulePath(filepath.Join(abs, "go.mod")); err != nil || mod != coxswainModule {
			return fmt.Errorf("--coxswain %s: not the coxswain source tree (module %s)", cox, coxswainModule)
		}
		fmt.Fprintf(&req, "\t%s %s\n", coxswainModule, zeroVersion)
		fmt.Fprintf(&repl, "replace %s => %s\n", coxswainModule, abs)
		if sum, err := os.ReadFile(filepath.Join(abs, "go.sum")); err == nil {
			if err := os.WriteFile(filepath.Join(b.dir, "go.sum"), sum, 0o644); err != nil {
				return err
			}
		}
		b.progress("coxswain from %s", abs)
	} else {
		fmt.Fprintf(&req, "\t%s %s\n", coxswainModule, cox)
		b.progress("coxswain %s", cox)
	}
	for _, w := range lo.UniqBy(lo.Filter(b.opts.with, func(w with, _ int) bool { return w.dir != "" }),
		func(w with) string { return w.module }) {
		fmt.Fprintf(&req, "\t%s %s\n", w.module, zeroVersion)
		fmt.Fprintf(&repl, "replace %s => %s\n", w.module, w.dir)
		b.progress("%s from %s", w.module, w.dir)
	}
	gomod := fmt.Sprintf("module coxswain.local/distribution\n\ngo %s\n\nrequire (\n%s)\n\n%s", goVersion(), req.String(), repl.String())
	return os.WriteFile(filepath.Join(b.dir, "go.mod"), []byte(gomod), 0o644)
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// goVersion is the local toolchain's language version (go1.26.8 -> 1.26.8).
func goVersion() string {
	v := strings.TrimPrefix(runtime.Version(), "go")
	if i := strings.IndexAny(v, " -+"); i >= 0 {
		v = v[:i]
	}
	return v
}

// resolve adds a --with from a module proxy (or the module cache) at its version.
func (b *builder) resolve(ctx context.Context, w with) error {
	if w.dir != "" {
		return nil
	}
	v := lo.Ternary(w.version == "", "latest", w.version)
	b.progress("go get %s@%s", w.path, v)
	_, err := b.goCmd(ctx, b.dir, "get", w.path+"@"+v)
	if err == nil {
		return nil
	}
	if v != "latest" && b.resolvesLatest(ctx, w.path) {
		return fmt.Errorf("--with %s@%s: version %s does not resolve (the module exists; try another version, or none for the latest): %w",
			w.path, w.version, w.version, err)
	}
	return fmt.Errorf("--with %s: unknown module path (no module proxy or cache has it): %w", w.path, err)
}

// resolvesLatest says whether path@latest resolves, trying it in a scratch copy of the module so
// that the real one is untouched.
func (b *builder) resolvesLatest(ctx context.Context, path string) bool {
	probe, err := os.MkdirTemp("", "coxswain-build-probe-")
	if err != nil {
		return false
	}
	defer func() { _ = os.RemoveAll(probe) }()
	for _, f := range []string{"go.mod", "go.sum"} {
		if data, err := os.ReadFile(filepath.Join(b.dir, f)); err == nil {
			_ = os.WriteFile(filepath.Join(probe, f), data, 0o644)
		}
	}
	_, err = b.goCmd(ctx, probe, "get", path+"@latest")
	return err == nil
}

// packages is what main imports: the stock list (read from the coxswain being built on) minus
// --without, plus --with; in full mode each one's translate/ half too.
func (b *builder) packages(ctx context.Context) ([]distro.Imports, error) {
	out, err := b.goCmd(ctx, b.dir, "list", "-mod=mod", "-f", `{{join .Imports "\n"}}`, coxswainModule+"/modules/standard")
	if err != nil {
		return nil, fmt.Errorf("reading the stock module list: %w", err)
	}
	stock := strings.Fields(string(out))
	for _, p := range b.opts.without {
		if !slices.Contains(stock, p) {
			return nil, fmt.Errorf("--without %s: not a stock package; the stock packages are:\n  %s", p, strings.Join(stock, "\n  "))
		}
	}
	stock = lo.Without(stock, b.opts.without...)
	extra := lo.Uniq(lo.Map(b.opts.with, func(w with, _ int) string { return w.path }))
	groups := []distro.Imports{{Comment: "The stock modules (modules/standard), less --without.", Paths: stock},
		{Comment: "--with", Paths: extra}}
	if b.opts.proxyOnly {
		return groups, nil
	}
	b.progress("looking for controller halves (P%s)", distro.TranslateSuffix)
	// -mod=mod: go list may need go.sum lines for the packages it loads, as the build will.
	env := append(slices.Clone(b.env), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
	halves, err := distro.TranslateHalves(ctx, b.dir, env, append(slices.Clone(stock), extra...))
	if err != nil {
		return nil, err
	}
	return append(groups, distro.Imports{Comment: "Controller halves.", Paths: halves}), nil
}

// writeMain writes main.go: the chosen packages, and the command line of a full or a proxy-only
// binary.
func (b *builder) writeMain(groups []distro.Imports) error {
	cmd := lo.Ternary(b.opts.proxyOnly, "proxycmd", "coxswaincmd")
	src, err := distro.File("// Code generated by coxswain-build; DO NOT EDIT.\n", "main", groups,
		[]string{coxswainModule + "/cmd/" + cmd}, "func main() { "+cmd+".Main() }\n")
	if err != nil {
		return err
	}
	if b.opts.verbose {
		fmt.Fprintf(b.stderr, "%s", src)
	}
	return os.WriteFile(filepath.Join(b.dir, "main.go"), src, 0o644)
}

// explainBuild names the --with package the build could not find, when that is the failure.
func (b *builder) explainBuild(err error) error {
	for _, w := range b.opts.with {
		msg := err.Error()
		if strings.Contains(msg, "does not contain package "+w.path) ||
			strings.Contains(msg, "no required module provides package "+w.path) ||
			strings.Contains(msg, "cannot find module providing package "+w.path) {
			return fmt.Errorf("--with %s: no such package in module %s: %w", w.path, lo.CoalesceOrEmpty(w.module, "?"), err)
		}
	}
	return fmt.Errorf("go build: %w", err)
}

var duplicate = regexp.MustCompile(`module "([^"]+)" registered twice: by package (\S+) and by package (\S+)`)

// check runs the result's list-modules: it must start (two packages registering one ID panic at
// init), and every --with package must register a module. A distribution that fails is removed.
func (b *builder) check(ctx context.Context, bin string) (err error) {
	defer func() {
		if err != nil {
			_ = os.Remove(bin)
		}
	}()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "list-modules", "--packages")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if m := duplicate.FindStringSubmatch(stderr.String()); m != nil {
			return fmt.Errorf("two packages register module %s: %s and %s; drop one (--without for a stock package)", m[1], m[2], m[3])
		}
		return fmt.Errorf("the built binary does not start: %w\n%s", err, stderr.String())
	}
	registered := map[string]bool{}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		id, pkg, _ := strings.Cut(line, " ")
		registered[pkg] = true
		ids = append(ids, id)
	}
	for _, w := range b.opts.with {
		if !registered[w.path] {
			return fmt.Errorf("--with %s: the package registers no module (a module package calls core.RegisterModule from init)", w.path)
		}
	}
	b.progress("built %s with %d modules:", bin, len(ids))
	fmt.Fprintln(b.stderr, "  "+strings.Join(ids, "\n  "))
	return nil
}

// goCmd runs the go command in dir and returns its stdout; the error carries its stderr. With
// -v, the go command's stderr is shown as it runs.
func (b *builder) goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), b.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if b.opts.verbose {
		fmt.Fprintf(b.stderr, "+ go %s\n", strings.Join(args, " "))
		cmd.Stderr = io.MultiWriter(&stderr, b.stderr)
	}
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w\n%s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
