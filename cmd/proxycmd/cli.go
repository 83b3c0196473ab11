// Package proxycmd is the command line of a proxy-only Coxswain binary: `proxy`, `list-modules`
// and `version`, with the logging, memory and proxy-limit flags they share. It imports core and
// nothing that reads Kubernetes, so a distribution built on it (cmd/coxswain-proxy, or
// `coxswain-build --proxy-only`) has no k8s.io or sigs.k8s.io package in its closure; a test holds
// it to that. Package coxswaincmd reuses it for the full binary.
//
// `serve` and `validate` are not here: they run the translator, which is built on the Gateway API
// Go types (sigs.k8s.io/gateway-api, k8s.io/apimachinery).
package proxycmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/coxswain-labs/coxswain/core"
)

const usage = `Usage: coxswain <command> [flags]

This is a proxy-only build: it serves the routing a controller streams and holds no Kubernetes
client. serve and validate are not in it, because they run the translator, which is built on the
Gateway API Go types; use the stock coxswain binary for them.

Commands:
  proxy                  serve traffic with the routing a controller streams (no Kubernetes credentials)
  list-modules           list the modules compiled into this binary
  version                print the version

Run "coxswain <command> -h" for a command's flags.
`

// Env is what a command may use: the frozen registry and where to write.
type Env struct {
	Reg    *core.Registry
	Stdout io.Writer
	Stderr io.Writer
}

// Main runs the proxy-only command line of os.Args and exits. Import the modules first (a blank
// import of modules/standard, or the builder's generated list): Main freezes the registry.
func Main() {
	os.Exit(Run(os.Args[1:], &Env{Reg: core.Freeze(), Stdout: os.Stdout, Stderr: os.Stderr}))
}

// Run dispatches a proxy-only command line and returns the exit code: 0 success, 1 failure, 2 bad
// usage.
func Run(args []string, e *Env) int {
	if len(args) == 0 {
		fmt.Fprint(e.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "proxy":
		return RunProxy(args[1:], e)
	case "list-modules":
		return ListModules(args[1:], e)
	case "version", "--version":
		return PrintVersion(args[1:], e)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(e.Stdout, usage)
		return 0
	case "serve", "validate", "controller":
		fmt.Fprintf(e.Stderr, "coxswain: %q is not in a proxy-only build (it needs the translator and the Gateway API types)\n\n%s", args[0], usage)
		return 2
	default:
		fmt.Fprintf(e.Stderr, "coxswain: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// ListModules prints the registered module IDs, sorted; with --packages, each followed by the Go
// package that registers it, which is how the builder checks that a --with package registers one.
func ListModules(args []string, e *Env) int {
	fs := NewFlagSet("list-modules", "[--packages]", e)
	packages := fs.Bool("packages", false, "print each module's Go package path after its ID")
	if code, ok := Parse(fs, args); !ok {
		return code
	}
	for _, id := range e.Reg.IDs() {
		if !*packages {
			fmt.Fprintln(e.Stdout, id)
			continue
		}
		info, _ := e.Reg.Lookup(id)
		fmt.Fprintf(e.Stdout, "%s %s\n", id, modulePackage(info))
	}
	return 0
}

// modulePackage is the Go package declaring the type info.New returns.
func modulePackage(info core.ModuleInfo) string {
	t := reflect.TypeOf(info.New())
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.PkgPath() == "" {
		return "-"
	}
	return t.PkgPath()
}

// NewFlagSet returns a flag set that reports errors instead of exiting, with a usage line.
func NewFlagSet(name, args string, e *Env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.Stderr, "Usage: coxswain %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args; when it returns ok=false the command should exit with code (0 for -h).
func Parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		fs.Usage()
		return 2, false
	}
	return 0, true
}

// StringList is a repeatable flag that also accepts comma-separated values.
type StringList []string

func (s *StringList) String() string { return strings.Join(*s, ",") }

// Set appends v's comma-separated values.
func (s *StringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*s = append(*s, p)
		}
	}
	return nil
}

// LogFlags are the logging flags.
type LogFlags struct {
	Format string
	Level  string
}

// Register adds the logging flags to fs.
func (l *LogFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&l.Format, "log-format", "json", "log format: json or console")
	fs.StringVar(&l.Level, "log-level", "info", "log level: debug, info, warn or error")
}
