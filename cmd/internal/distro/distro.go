// Package distro holds what the stock binary's generator and the builder share about a
// distribution: a module package P's controller half is the package P/translate when it exists,
// and a distribution's main is a file of blank imports.
package distro

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/format"
	"os/exec"
	"strings"
)

// TranslateSuffix names the controller half of a module package: P's is P + TranslateSuffix.
const TranslateSuffix = "/translate"

// TranslateHalves returns the controller half of each package in pkgs that has one, in pkgs'
// order, as `go list` run in dir (with env added to the environment) resolves them. A P/translate
// that does not exist, or that no required module provides, is simply absent.
func TranslateHalves(ctx context.Context, dir string, env []string, pkgs []string) ([]string, error) {
	if len(pkgs) == 0 {
		return nil, nil
	}
	args := []string{"list", "-e", "-f", "{{.ImportPath}} {{len .GoFiles}}"}
	for _, p := range pkgs {
		args = append(args, p+TranslateSuffix)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	exists := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, n, _ := strings.Cut(sc.Text(), " ")
		exists[path] = n != "0"
	}
	var halves []string
	for _, p := range pkgs {
		if exists[p+TranslateSuffix] {
			halves = append(halves, p+TranslateSuffix)
		}
	}
	return halves, nil
}

// Imports is one commented group of blank imports.
type Imports struct {
	Comment string
	Paths   []string
}

// File renders a gofmt'ed Go file: header (comment lines, each starting with //), the package
// clause, the blank-import groups, then body.
func File(header, pkg string, groups []Imports, named []string, body string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	fmt.Fprintf(&b, "\npackage %s\n\nimport (\n", pkg)
	for _, n := range named {
		fmt.Fprintf(&b, "\t%q\n", n)
	}
	first := len(named) == 0
	for _, g := range groups {
		if len(g.Paths) == 0 {
			continue
		}
		if !first {
			b.WriteString("\n")
		}
		first = false
		if g.Comment != "" {
			fmt.Fprintf(&b, "\t// %s\n", g.Comment)
		}
		for _, p := range g.Paths {
			fmt.Fprintf(&b, "\t_ %q\n", p)
		}
	}
	b.WriteString(")\n")
	if body != "" {
		b.WriteString("\n" + body)
	}
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the generated file: %w\n%s", err, b.Bytes())
	}
	return src, nil
}
