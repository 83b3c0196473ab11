package core

import (
	"strings"
)

// ModuleID is a dotted, namespaced module name: "<namespace>.<name>", e.g. "filter.http.request_redirect".
// The last label is the name; everything before it is the namespace.
type ModuleID string

// Namespace is the ID without its last label ("filter.http" for "filter.http.request_redirect").
func (id ModuleID) Namespace() string {
	i := strings.LastIndexByte(string(id), '.')
	if i < 0 {
		return ""
	}
	return string(id)[:i]
}

// Name is the last label of the ID.
func (id ModuleID) Name() string {
	i := strings.LastIndexByte(string(id), '.')
	return string(id)[i+1:]
}

// ModuleInfo describes a module: its ID and how to make a fresh, zero-valued instance.
type ModuleInfo struct {
	ID ModuleID
	// New returns a new, empty instance. It must have no side effects.
	New func() Module
}

// Module is implemented by every module. CoxswainModule must have no side effects.
type Module interface {
	CoxswainModule() ModuleInfo
}

// Provisioner is implemented by modules that need set-up after their config is decoded:
// compiling patterns, resolving other modules, opening resources.
type Provisioner interface {
	Provision(ctx *BuildContext) error
}

// Validator is implemented by modules that check their (provisioned) config.
type Validator interface {
	Validate() error
}

// CleanerUpper is implemented by modules that hold resources. Cleanup runs once the routing table
// that loaded the module has been retired and its in-flight requests have finished.
type CleanerUpper interface {
	Cleanup() error
}

// ConfigChecker is optionally implemented by modules whose config can be checked without being
// provisioned. CheckConfig runs on a freshly decoded instance and must have no side effects (no
// I/O, no goroutines): the controller calls it to report an invalid config (a pattern that does
// not compile) in the route's status before any proxy loads it.
type ConfigChecker interface {
	CheckConfig() error
}
