package proxy

import (
	"context"
	"errors"
	"maps"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Options configure a Proxy.
type Options struct {
	Log *zap.Logger
	// Registry holds the modules a snapshot may name; Apply loads only those it names.
	Registry *core.Registry
	// Limits are the listener and upstream limits; the zero value means DefaultLimits.
	Limits Limits
	// BindRetryMin and BindRetryMax bound the backoff with which a listener that could not be
	// bound is tried again (DefaultBindRetryMin and DefaultBindRetryMax when zero).
	BindRetryMin, BindRetryMax time.Duration
	// ModuleSettings are handed to every module as core.BuildContext.Settings.
	ModuleSettings map[string]string
	// Metrics is where modules' series are registered (core.BuildContext.Metrics); nil: nowhere.
	Metrics prometheus.Registerer
	// RequestMetrics turns on the per-request series (coxswain_proxy_requests_total and the
	// request duration histogram) on Metrics.
	RequestMetrics bool
	// AccessLog receives one line per request; nil: none. The caller closes it after Close.
	AccessLog *accesslog.Logger
	// SharedMessages says that each snapshot applied shares with the previous one the messages
	// that did not change (virtual hosts, routes, clusters) and that no message changes once
	// applied: the proxy then remembers their hashes by address instead of hashing every route
	// of every snapshot (shape.go, partSums). The in-process publisher and the discovery agent
	// apply such snapshots; a caller that edits a snapshot in place and applies it again must not
	// set it.
	SharedMessages bool
}

// BoundListener is one socket the proxy has actually bound.
type BoundListener struct {
	// Name is the IR listener name ("<address>:<port>/<protocol>").
	Name     string
	Protocol string
	// Address is the bound "host:port", with the real port when the IR asked for port 0.
	Address string
}

// Proxy is the engine: it applies snapshots and serves their listeners. Its methods are safe for
// concurrent use; Apply calls are serialized.
type Proxy struct {
	log    *zap.Logger
	reg    *core.Registry
	limits Limits

	cur atomic.Pointer[table] // the table serving now; nil before the first Apply

	mu       sync.Mutex // serializes Apply, Close and Bound
	closed   bool
	sockets  map[sockKey]*socket
	failed   map[sockKey]*ListenerFailure // listeners of cur that could not be bound
	retry    *time.Timer                  // retries failed; nil when none
	changed  chan struct{}                // closed when sockets or failed change
	retired  map[*table]struct{}          // retired tables not yet closed
	draining map[*serving]struct{}        // servers shutting down gracefully
	drains   sync.WaitGroup               // their goroutines

	fwd    *forwarders
	dialer *net.Dialer // layer-4 upstream connections
	certs  certCache
	upTLS  upstreamTLSCache // the clusters' compiled upstream TLS, by content

	retryMin, retryMax time.Duration

	shared   *core.SharedState // module state that outlives tables
	settings map[string]string
	metrics  *core.Metrics
	breakers *breakerSeries         // made by the first build with a circuit breaker (breakerSeriesOf)
	retries  *prometheus.CounterVec // coxswain_proxy_retries_total, made by the first build with a retry (retryCountersOf)
	requests *requestSeries         // made by the first build when reqMetrics (requestSeriesOf)

	reqMetrics bool
	accessLog  *accesslog.Logger

	// fullBuilds turns off sharing with the serving table (reuse.go): every build compiles
	// everything. For tests and benchmarks comparing the two.
	fullBuilds bool
	builds     uint64 // tables built so far (under mu)
	// sums are the remembered hashes of Options.SharedMessages (under mu); nil without it.
	sums *partSums
}

// New returns a Proxy that serves nothing until the first Apply.
func New(opts Options) *Proxy {
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	reg := opts.Registry
	if reg == nil {
		reg = core.Freeze()
	}
	limits := opts.Limits.withDefaults()
	if opts.BindRetryMin <= 0 {
		opts.BindRetryMin = DefaultBindRetryMin
	}
	if opts.BindRetryMax < opts.BindRetryMin {
		opts.BindRetryMax = max(DefaultBindRetryMax, opts.BindRetryMin)
	}
	var sums *partSums
	if opts.SharedMessages {
		sums = &partSums{}
	}
	return &Proxy{
		sums:     sums,
		log:      log,
		reg:      reg,
		limits:   limits,
		retryMin: opts.BindRetryMin,
		retryMax: opts.BindRetryMax,
		sockets:  map[sockKey]*socket{},
		failed:   map[sockKey]*ListenerFailure{},
		changed:  make(chan struct{}),
		retired:  map[*table]struct{}{},
		draining: map[*serving]struct{}{},
		fwd:      newForwarders(log, limits),
		dialer:   newUpstreamDialer(limits),
		shared:   core.NewSharedState(),
		settings: maps.Clone(opts.ModuleSettings),
		metrics:  core.NewMetrics(opts.Metrics),

		reqMetrics: opts.RequestMetrics,
		accessLog:  opts.AccessLog,
	}
}

// ErrClosed is returned by Apply after Close.
var ErrClosed = errors.New("proxy is closed")

// Version is the version of the table serving now, "" before the first successful Apply.
func (p *Proxy) Version() string {
	if t := p.cur.Load(); t != nil {
		return t.ver()
	}
	return ""
}

// Apply builds a routing table from snap, binds any new listener sockets, swaps the table in
// atomically and retires the old one (its modules' Cleanup runs once its in-flight requests have
// finished). A snapshot that cannot be built (a module missing or invalid, a certificate that does
// not parse, two listeners on one socket) is rejected whole: the previous table keeps serving and
// the error names what failed. A listener whose socket cannot be bound (the port is taken, the
// address is not local) does not reject it: the table is applied with the listeners that bound,
// the others are listed by Failed and retried at every Apply and with backoff, and each one that
// binds later starts serving the current table. Applying the version already serving is a no-op
// apart from retrying failed binds (a snapshot without a version is always applied).
func (p *Proxy) Apply(ctx context.Context, snap *irv1.Snapshot) error {
	return p.apply(ctx, snap)
}

// Check compiles snap as Apply would, loading its modules and cleaning them up again, without
// binding or serving anything: the error is the one Apply would reject snap with. The fuzz test of
// the IR decoder (controller/standalone) drives it with arbitrary snapshots.
func (p *Proxy) Check(ctx context.Context, snap *irv1.Snapshot) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := p.build(ctx, snap, digestOf(snap))
	if err != nil {
		return err
	}
	t.cleanup() // its own modules, and its holds on the serving table's parts it shares
	return nil
}

// Bound lists the sockets bound now, sorted by name.
func (p *Proxy) Bound() []BoundListener {
	return p.bound()
}

// Failed lists the listeners of the table serving now that could not be bound, sorted by name.
func (p *Proxy) Failed() []ListenerFailure {
	return p.failedList()
}

// ListenersChanged returns a channel that is closed at the next change of Bound or Failed: an
// Apply, or a retried bind that succeeded. Call it again for the change after that.
func (p *Proxy) ListenersChanged() <-chan struct{} {
	return p.listenersChanged()
}

// Close stops accepting on every socket, lets in-flight requests finish until ctx is done (then
// closes their connections), and cleans up every table's modules.
func (p *Proxy) Close(ctx context.Context) error {
	return p.close(ctx)
}
