// Package discoverytest holds test doubles for the discovery protocol's benchmarks.
package discoverytest

import (
	"context"
	"slices"
	"sync"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// DecodeOnly is a proxy agent's engine that takes every snapshot (the agent has decoded it) and
// builds and binds nothing, saying it bound every listener (the Programmed gate waits for binds):
// it isolates what the protocol costs from what building a routing table costs.
type DecodeOnly struct {
	mu      sync.Mutex
	version string
	bound   []proxy.BoundListener
}

// Apply records snap's version and its listeners as bound.
func (d *DecodeOnly) Apply(_ context.Context, snap *irv1.Snapshot) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.version = snap.GetVersion()
	d.bound = d.bound[:0]
	for _, l := range snap.GetListeners() {
		d.bound = append(d.bound, proxy.BoundListener{Name: l.GetName(), Protocol: l.GetProtocol(), Address: "127.0.0.1:1"})
	}
	return nil
}

// Version is the version of the last snapshot applied.
func (d *DecodeOnly) Version() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.version
}

// Bound lists every listener of the last snapshot.
func (d *DecodeOnly) Bound() []proxy.BoundListener {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.bound)
}

// Failed is empty: nothing is bound, so nothing fails to bind.
func (d *DecodeOnly) Failed() []proxy.ListenerFailure { return nil }

// ListenersChanged is nil: the listeners never change on their own.
func (d *DecodeOnly) ListenersChanged() <-chan struct{} { return nil }
