package controller

import (
	"context"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Publisher hands snapshots to the data plane. The leader owns one per leadership term.
type Publisher interface {
	// Publish makes snap the data plane's desired state. It may return before proxies have
	// applied it; they report that through the AppliedFunc the Publisher was made with. An error
	// means the snapshot was not handed over; the controller publishes again later.
	Publish(ctx context.Context, snap *irv1.Snapshot) error
	// Close stops publishing and releases what the Publisher holds (sockets, streams).
	Close(ctx context.Context) error
}

// AppliedFunc is how a Publisher reports that the data plane has bound the listeners of a
// snapshot and acknowledged it: the Gateways it carries are programmed at those generations.
type AppliedFunc func(gateways []*irv1.GatewayGeneration)

// NewPublisher starts the Publisher of one leadership term. ctx ends with the term.
type NewPublisher func(ctx context.Context, applied AppliedFunc) (Publisher, error)
