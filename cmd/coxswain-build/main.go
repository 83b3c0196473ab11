// Command coxswain-build builds a custom Coxswain distribution, as xcaddy builds Caddy: it writes
// a temporary main package that blank-imports the chosen module packages (the stock list in
// modules/standard, less --without, plus --with), pins them in a temporary go.mod (a replace
// for each local directory), builds it with the local Go toolchain and prints the result's
// modules. docs/building.md has the details.
//
//	go run ./cmd/coxswain-build --with example.com/hmacsign=./examples/custom-filter --output bin/x
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `Usage: coxswain-build [flags]

Builds a Coxswain binary with the stock modules, less --without, plus --with. In the full build
(the default), each module package P's controller half P/translate is compiled in when it exists;
--proxy-only builds the proxy command alone, with no Kubernetes package in the binary.

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}

// run builds and returns the exit code: 0 built, 1 failed, 2 bad usage.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	opts, code, ok := parseFlags(args, stderr)
	if !ok {
		return code
	}
	dir, err := os.MkdirTemp("", "coxswain-build-")
	if err != nil {
		fmt.Fprintln(stderr, "coxswain-build:", err)
		return 1
	}
	b := &builder{opts: opts, dir: dir, stderr: stderr}
	if opts.offline {
		// Everything must come from the module cache; the checksums from the seeded go.sum.
		b.env = append(b.env, "GOPROXY=off")
	}
	if opts.keep {
		b.progress("keeping %s", dir)
	} else {
		defer func() { _ = os.RemoveAll(dir) }()
	}
	if err := b.build(ctx); err != nil {
		fmt.Fprintln(stderr, "coxswain-build: error:", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (opts options, code int, ok bool) {
	fs := flag.NewFlagSet("coxswain-build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var withs, withouts stringList
	fs.Var(&withs, "with", "MODULE_PATH[@VERSION][=LOCAL_DIR]: a module, or a package inside one, to compile in (repeatable)")
	fs.Var(&withouts, "without", "a stock package (from modules/standard) to leave out, with its translate/ half (repeatable)")
	fs.BoolVar(&opts.proxyOnly, "proxy-only", false, "build the proxy command alone: proxy halves only, no Kubernetes package")
	fs.StringVar(&opts.output, "output", "coxswain", "the binary to write")
	fs.StringVar(&opts.coxswain, "coxswain", "", "coxswain to build on: a source directory or a module version; the source tree around the working directory when empty")
	fs.BoolVar(&opts.offline, "offline", false, "use the module cache only (GOPROXY=off): everything must have been downloaded before")
	fs.BoolVar(&opts.verbose, "v", false, "show the generated main.go and the go commands' output")
	fs.BoolVar(&opts.keep, "keep", false, "keep the temporary module (its path is printed) to inspect it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return opts, 0, false
		}
		return opts, 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "coxswain-build: unexpected arguments: %v\n", fs.Args())
		return opts, 2, false
	}
	for _, s := range withs {
		w, err := parseWith(s)
		if err != nil {
			fmt.Fprintln(stderr, "coxswain-build:", err)
			return opts, 2, false
		}
		opts.with = append(opts.with, w)
	}
	opts.without = withouts
	if opts.coxswain == "" {
		wd, err := os.Getwd()
		if err == nil {
			opts.coxswain, err = findCoxswain(wd)
		}
		if err != nil {
			fmt.Fprintln(stderr, "coxswain-build:", err)
			return opts, 2, false
		}
	}
	return opts, 0, true
}
