package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// newFlagSet returns a flag set that reports errors instead of exiting, with a usage line.
func newFlagSet(name, args string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: coxswain %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; when it returns ok=false the command should exit with code (0 for -h).
func parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
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

// configFlags are the flags serve and validate share.
type configFlags struct {
	path           string
	controllerName string
	allowLoopback  bool
}

func (c *configFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.path, "f", "", "manifest file or directory (walked recursively for *.yaml, *.yml, *.json)")
	fs.StringVar(&c.controllerName, "controller-name", translator.DefaultControllerName,
		"the GatewayClass spec.controllerName this coxswain answers to")
	fs.BoolVar(&c.allowLoopback, "allow-loopback-endpoints", true,
		"accept EndpointSlice addresses on loopback (127.0.0.0/8, ::1), as local backends are")
}

func (c *configFlags) check(fs *flag.FlagSet) bool {
	if c.path == "" {
		fmt.Fprintln(fs.Output(), "missing -f PATH")
		fs.Usage()
		return false
	}
	return true
}

func (c *configFlags) translateOptions() translator.Options {
	return translator.Options{ControllerName: c.controllerName, AllowLoopbackEndpoints: c.allowLoopback}
}

// logFlags are the logging flags.
type logFlags struct {
	format string
	level  string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "json", "log format: json or console")
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
}
