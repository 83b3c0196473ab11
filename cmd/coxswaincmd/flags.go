package coxswaincmd

import (
	"flag"
	"fmt"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

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
	// No CRD can prune status.addresses[].routability here: it is always reported (GEP-5093).
	return translator.Options{ControllerName: c.controllerName, AllowLoopbackEndpoints: c.allowLoopback, Routability: true}
}
