package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// BuildContext is what a module sees while a routing table is built from a snapshot. It owns the
// cleanup of every module loaded through it: when the table retires, Close runs their Cleanup.
type BuildContext struct {
	context.Context
	// Log is named after the module being loaded while its Provision runs.
	Log      *zap.Logger
	Registry *Registry
	// Snapshot is the snapshot being built; modules read it, never modify it.
	Snapshot *irv1.Snapshot
	// Shared keeps state across tables (Shared); nil in a context a test makes by hand.
	Shared *SharedState
	// Settings are the process's module settings ("<module>.<name>" → value, from the proxy's
	// --module-setting flags): what an operator configures once per proxy rather than per route,
	// such as the address of a shared rate-limit store. Read-only.
	Settings map[string]string
	// Metrics exports a module's counters through the proxy's Prometheus registry (see Metrics);
	// nil-safe.
	Metrics *Metrics
	// Clusters are the snapshot's clusters, for a module that calls a service of its own; the
	// engine builds every cluster before the routes and their filters. Look clusters up in
	// Provision: the engine drops this once the table is built. nil in a context a test makes by
	// hand.
	Clusters Clusters
	// AccessLog takes the access log records of traffic a module sends on its own (a request
	// mirror's copies); a nil Logger logs nothing.
	AccessLog *accesslog.Logger

	cleanups []CleanerUpper
}

// NewBuildContext returns a context for building one table.
func NewBuildContext(ctx context.Context, log *zap.Logger, reg *Registry, snap *irv1.Snapshot) *BuildContext {
	if log == nil {
		log = zap.NewNop()
	}
	return &BuildContext{Context: ctx, Log: log, Registry: reg, Snapshot: snap}
}

// Load makes a module instance from its config: New, strict JSON decode, Provision, Validate, and a
// check that the instance implements T. The instance is cleaned up by bc.Close.
func Load[T any](bc *BuildContext, mc *irv1.ModuleConfig) (T, error) {
	var zero T
	if mc == nil || mc.GetId() == "" {
		return zero, errors.New("module config without an ID")
	}
	id := ModuleID(mc.GetId())
	info, ok := bc.Registry.Lookup(id)
	if !ok {
		return zero, &MissingModuleError{ID: id}
	}
	mod := info.New()
	if err := DecodeStrict(mc.GetJson(), mod); err != nil {
		return zero, fmt.Errorf("module %s: decoding config: %w", id, err)
	}
	log := bc.Log
	bc.Log = log.Named(string(id))
	err := provision(bc, mod)
	bc.Log = log
	if err != nil {
		return zero, fmt.Errorf("module %s: %w", id, err)
	}
	if c, ok := mod.(CleanerUpper); ok {
		bc.cleanups = append(bc.cleanups, c)
	}
	t, ok := mod.(T)
	if !ok {
		return zero, fmt.Errorf("module %s is a %T, which does not implement %T", id, mod, (*T)(nil))
	}
	return t, nil
}

func provision(bc *BuildContext, mod Module) error {
	if p, ok := mod.(Provisioner); ok {
		if err := p.Provision(bc); err != nil {
			// A half-provisioned module may hold resources.
			if c, ok := mod.(CleanerUpper); ok {
				_ = c.Cleanup()
			}
			return fmt.Errorf("provision: %w", err)
		}
	}
	if v, ok := mod.(Validator); ok {
		if err := v.Validate(); err != nil {
			if c, ok := mod.(CleanerUpper); ok {
				_ = c.Cleanup()
			}
			return fmt.Errorf("invalid config: %w", err)
		}
	}
	return nil
}

// Close runs the Cleanup of every module loaded through bc, newest first, and joins their errors.
func (bc *BuildContext) Close() error {
	var errs []error
	for i := len(bc.cleanups) - 1; i >= 0; i-- {
		if err := bc.cleanups[i].Cleanup(); err != nil {
			errs = append(errs, err)
		}
	}
	bc.cleanups = nil
	return errors.Join(errs...)
}

// HasCleanups reports whether Close has anything to do: a Cleanup to run or a shared value to
// release. The engine drops the contexts of table parts that have none (a route of stateless
// modules, most of them) rather than keep one per route.
func (bc *BuildContext) HasCleanups() bool { return len(bc.cleanups) > 0 }

// MissingModuleError says a snapshot named a module this binary does not have.
type MissingModuleError struct{ ID ModuleID }

func (e *MissingModuleError) Error() string {
	return fmt.Sprintf("module %s is not in this build (see `coxswain list-modules`)", e.ID)
}

// DecodeStrict decodes JSON into v, rejecting unknown fields and trailing data. Empty input leaves
// v at its zero value.
func DecodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// MustConfig encodes v as a ModuleConfig for id. It is for translators and tests, which build
// configs from typed values; it panics only if v cannot be marshalled, which is a programmer error.
func MustConfig(id ModuleID, v any) *irv1.ModuleConfig {
	if v == nil {
		return &irv1.ModuleConfig{Id: string(id)}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("core.MustConfig(%s): %v", id, err))
	}
	return &irv1.ModuleConfig{Id: string(id), Json: b}
}
