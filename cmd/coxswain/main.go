// Command coxswain is the stock Coxswain binary: a Kubernetes Gateway API implementation whose
// standalone mode (`coxswain serve -f DIR`) runs the translator and the proxy in one process from
// manifests on disk.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/coxswain-labs/coxswain/core"
	_ "github.com/coxswain-labs/coxswain/modules/standard" // the stock module set
)

const usage = `Usage: coxswain <command> [flags]

Commands:
  controller             run in a cluster: watch the Gateway API, write status, stream snapshots to proxies
  proxy                  serve traffic with the routing a controller streams (no Kubernetes credentials)
  serve -f PATH          serve the Gateway API manifests at PATH (file or directory), reloading on change
  validate -f PATH       print the status the manifests would get and every problem; exit 1 on errors
  list-modules           list the modules compiled into this binary
  version                print the version

Run "coxswain <command> -h" for a command's flags.
`

func main() {
	reg := core.Freeze()
	os.Exit(run(os.Args[1:], &env{reg: reg, stdout: os.Stdout, stderr: os.Stderr}))
}

// env is what a command may use: the frozen registry and where to write.
type env struct {
	reg    *core.Registry
	stdout io.Writer
	stderr io.Writer
}

// run dispatches a command line and returns the exit code: 0 success, 1 failure, 2 bad usage.
func run(args []string, e *env) int {
	if len(args) == 0 {
		fmt.Fprint(e.stderr, usage)
		return 2
	}
	switch args[0] {
	case "controller":
		return runController(args[1:], e)
	case "proxy":
		return runProxy(args[1:], e)
	case "serve":
		return serve(args[1:], e)
	case "validate":
		return validate(args[1:], e)
	case "list-modules":
		return listModules(args[1:], e)
	case "version", "--version":
		return printVersion(args[1:], e)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(e.stdout, usage)
		return 0
	default:
		fmt.Fprintf(e.stderr, "coxswain: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

func listModules(args []string, e *env) int {
	fs := newFlagSet("list-modules", "", e)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	for _, id := range e.reg.IDs() {
		fmt.Fprintln(e.stdout, id)
	}
	return 0
}
