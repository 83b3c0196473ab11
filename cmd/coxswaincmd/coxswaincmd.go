// Package coxswaincmd is the command line of the full Coxswain binary: the proxy-only commands of
// package proxycmd, and `controller`, `serve` and `validate`, which run the translator. A main
// package (cmd/coxswain, or one the builder generates) blank-imports its modules and calls Main.
package coxswaincmd

import (
	"fmt"
	"os"

	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	"github.com/coxswain-labs/coxswain/core"
)

const usage = `Usage: coxswain <command> [flags]

Commands:
  controller             run in a cluster: watch the Gateway API, write status, stream snapshots to proxies
  proxy                  serve traffic with the routing a controller streams (no Kubernetes credentials)
  serve -f PATH          serve the Gateway API manifests at PATH (file or directory), reloading on change
  validate -f PATH       print the status the manifests would get and every problem; exit 1 on errors
                         (-o gateway-api: the Gateway API objects that express its Ingresses)
  list-modules           list the modules compiled into this binary
  version                print the version

Run "coxswain <command> -h" for a command's flags.
`

// Main runs the command line of os.Args and exits. Import the modules first: Main freezes the
// registry.
func Main() {
	os.Exit(Run(os.Args[1:], &proxycmd.Env{Reg: core.Freeze(), Stdout: os.Stdout, Stderr: os.Stderr}))
}

// Run dispatches a command line and returns the exit code: 0 success, 1 failure, 2 bad usage.
func Run(args []string, e *proxycmd.Env) int {
	if len(args) == 0 {
		fmt.Fprint(e.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "controller":
		return runController(args[1:], e)
	case "proxy":
		return proxycmd.RunProxy(args[1:], e)
	case "serve":
		return serve(args[1:], e)
	case "validate":
		return validate(args[1:], e)
	case "list-modules":
		return proxycmd.ListModules(args[1:], e)
	case "version", "--version":
		return proxycmd.PrintVersion(args[1:], e)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(e.Stdout, usage)
		return 0
	default:
		fmt.Fprintf(e.Stderr, "coxswain: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
