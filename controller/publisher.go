package controller

import (
	"context"

	"github.com/coxswain-labs/coxswain/controller/status"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Publisher hands snapshots to the data plane. The leader owns one per leadership term.
type Publisher interface {
	// Publish makes snap the data plane's desired state. It may return before proxies have
	// applied it; they report that through the Reporter the Publisher was made with. An error
	// means the snapshot was not handed over; the controller publishes again later.
	Publish(ctx context.Context, snap *irv1.Snapshot) error
	// Close stops publishing and releases what the Publisher holds (sockets, streams).
	Close(ctx context.Context) error
}

// Reporter is how a Publisher tells the status writer what the data plane did with the
// snapshots (status.Writer implements it). Calls may come from any goroutine.
type Reporter interface {
	// Applied says every relevant proxy has bound the listeners of a snapshot carrying these
	// Gateway generations and acknowledged it: they are programmed.
	Applied(gateways []*irv1.GatewayGeneration)
	// Pending says a Gateway's generation is not programmed yet, and what it waits for, in words
	// fit for a condition message ("proxy a to acknowledge, proxy b to bind port 80").
	Pending(gateway *irv1.GatewayGeneration, awaiting string)
	// Unbound says which listeners of a Gateway some proxy serving it could not bind (the port is
	// taken, the address is not local to the proxy), replacing what was said before for that
	// Gateway; none clears it. The proxies serve everything else and keep retrying these, so
	// this may change at any time, independently of Applied.
	Unbound(gateway *irv1.GatewayGeneration, failures []ListenerFailure)
	// ModulesMissing says which route rules some proxy cannot serve as written because its
	// binary lacks a module they need (the proxy answers 500 for them, or leaves them out),
	// replacing what was said before; none clears it.
	ModulesMissing(gaps []RouteModuleGap)
}

// ListenerFailure is one Gateway listener one proxy could not bind. The status writer owns the
// type (this package imports it, not the other way round).
type ListenerFailure = status.ListenerFailure

// RouteModuleGap is one route rule one proxy cannot serve as written (status owns the type).
type RouteModuleGap = status.RouteModuleGap

// NewPublisher starts the Publisher of one leadership term. ctx ends with the term.
type NewPublisher func(ctx context.Context, report Reporter) (Publisher, error)

// ServingPublisher is a Publisher that can tell whether the data plane serves what it was
// handed: every proxy has applied the snapshot it was last sent and pred holds for it. The ACME
// client waits on it before a CA validates a challenge only the proxies can answer.
type ServingPublisher interface {
	Publisher
	Serving(pred func(*irv1.Snapshot) bool) bool
}
