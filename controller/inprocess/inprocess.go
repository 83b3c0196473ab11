// Package inprocess is the Publisher that serves traffic from the controller's own process: each
// leadership term runs a core/proxy engine and applies every snapshot to it. It lets `coxswain
// controller` serve end to end until the discovery gRPC server replaces it behind the same
// controller.Publisher interface.
package inprocess

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// Options configure the in-process data plane.
type Options struct {
	Log      *zap.Logger
	Registry *core.Registry
	Limits   proxy.Limits
	// ModuleSettings and Metrics are the proxy's (proxy.Options).
	ModuleSettings map[string]string
	Metrics        prometheus.Registerer
	// RequestMetrics and AccessLog are the proxy's too; the caller closes AccessLog, which
	// outlives the proxies of each leadership term.
	RequestMetrics bool
	AccessLog      *accesslog.Logger
}

// proxyName is how conditions name the in-process proxy.
const proxyName = "in-process"

// New returns the controller.NewPublisher that starts a fresh proxy for each leadership term.
func New(opts Options) controller.NewPublisher {
	return func(_ context.Context, report controller.Reporter) (controller.Publisher, error) {
		// The translator shares unchanged messages between snapshots and never edits a sealed one.
		px := proxy.New(proxy.Options{Log: opts.Log, Registry: opts.Registry, Limits: opts.Limits,
			ModuleSettings: opts.ModuleSettings, Metrics: opts.Metrics, RequestMetrics: opts.RequestMetrics, AccessLog: opts.AccessLog,
			SharedMessages: true})
		p := &publisher{proxy: px, report: report, done: make(chan struct{}), reported: map[string][]controller.ListenerFailure{}}
		p.wg.Go(p.watch)
		return p, nil
	}
}

// publisher applies snapshots synchronously, so a nil error means the table is serving and every
// listener that could be bound is: that is the acknowledgement Programmed waits for. Listeners
// the proxy cannot bind are reported as Unbound, again whenever that changes.
type publisher struct {
	proxy  *proxy.Proxy
	report controller.Reporter
	done   chan struct{}
	stop   sync.Once
	wg     sync.WaitGroup

	mu       sync.Mutex
	snap     *irv1.Snapshot
	reported map[string][]controller.ListenerFailure // by "<namespace>/<name>"
}

var _ controller.Publisher = (*publisher)(nil)

func (p *publisher) Publish(ctx context.Context, snap *irv1.Snapshot) error {
	if err := p.proxy.Apply(ctx, snap); err != nil {
		return fmt.Errorf("applying snapshot %s: %w", snap.GetVersion(), err)
	}
	p.report.Applied(snap.GetGateways())
	p.mu.Lock()
	p.snap = snap
	p.mu.Unlock()
	p.reportUnbound()
	return nil
}

func (p *publisher) Close(ctx context.Context) error {
	p.stop.Do(func() { close(p.done) })
	p.wg.Wait()
	return p.proxy.Close(ctx)
}

// watch reports Unbound again whenever the proxy's listeners change (a retried bind succeeded).
func (p *publisher) watch() {
	for {
		select {
		case <-p.done:
			return
		case <-p.proxy.ListenersChanged():
		}
		p.reportUnbound()
	}
}

// reportUnbound reports, for every Gateway of the snapshot serving, the listeners the proxy
// cannot bind, when they changed since the last report.
func (p *publisher) reportUnbound() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.snap == nil {
		return
	}
	byName := map[string]proxy.ListenerFailure{}
	for _, f := range p.proxy.Failed() {
		byName[f.Name] = f
	}
	now := map[string][]controller.ListenerFailure{}
	for _, l := range p.snap.GetListeners() {
		f, ok := byName[l.GetName()]
		if !ok {
			continue
		}
		for _, sv := range l.GetServers() {
			for _, src := range sv.GetSources() {
				parts := strings.SplitN(src, "/", 3)
				if len(parts) < 3 {
					continue
				}
				gw := parts[0] + "/" + parts[1]
				now[gw] = append(now[gw], controller.ListenerFailure{Listener: parts[2], Proxy: proxyName, Address: f.Address,
					Error: f.Error, AddressNotUsable: f.Reason == proxy.BindAddressNotAvailable})
			}
		}
	}
	for _, g := range p.snap.GetGateways() {
		k := g.GetNamespace() + "/" + g.GetName()
		if !reflect.DeepEqual(now[k], p.reported[k]) {
			p.report.Unbound(g, now[k])
		}
	}
	p.reported = now
}

// Serving implements controller.ServingPublisher: Publish applies synchronously, so the snapshot
// published last is the one serving.
func (p *publisher) Serving(pred func(*irv1.Snapshot) bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.snap != nil && pred(p.snap)
}
