// Package inprocess is the Publisher that serves traffic from the controller's own process: each
// leadership term runs a core/proxy engine and applies every snapshot to it. It lets `coxswain
// controller` serve end to end until the discovery gRPC server replaces it behind the same
// controller.Publisher interface.
package inprocess

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// Options configure the in-process data plane.
type Options struct {
	Log      *zap.Logger
	Registry *core.Registry
	Limits   proxy.Limits
}

// New returns the controller.NewPublisher that starts a fresh proxy for each leadership term.
func New(opts Options) controller.NewPublisher {
	return func(_ context.Context, report controller.Reporter) (controller.Publisher, error) {
		px := proxy.New(proxy.Options{Log: opts.Log, Registry: opts.Registry, Limits: opts.Limits})
		return &publisher{proxy: px, report: report}, nil
	}
}

// publisher applies snapshots synchronously, so a nil error means the listeners are bound and
// the table is serving: that is the acknowledgement Programmed waits for.
type publisher struct {
	proxy  *proxy.Proxy
	report controller.Reporter
}

var _ controller.Publisher = (*publisher)(nil)

func (p *publisher) Publish(ctx context.Context, snap *irv1.Snapshot) error {
	if err := p.proxy.Apply(ctx, snap); err != nil {
		return fmt.Errorf("applying snapshot %s: %w", snap.GetVersion(), err)
	}
	p.report.Applied(snap.GetGateways())
	return nil
}

func (p *publisher) Close(ctx context.Context) error { return p.proxy.Close(ctx) }
