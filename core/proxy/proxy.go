package proxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Options configure a Proxy.
type Options struct {
	Log *zap.Logger
	// Registry holds the modules a snapshot may name; Apply loads only those it names.
	Registry *core.Registry
	// Limits are the listener and upstream limits; the zero value means DefaultLimits.
	Limits Limits
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
	retired  map[*table]struct{}   // retired tables not yet closed
	draining map[*serving]struct{} // servers shutting down gracefully
	drains   sync.WaitGroup        // their goroutines

	fwd    *forwarders
	dialer *net.Dialer // layer-4 upstream connections
	certs  certCache
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
	return &Proxy{
		log:      log,
		reg:      reg,
		limits:   limits,
		sockets:  map[sockKey]*socket{},
		retired:  map[*table]struct{}{},
		draining: map[*serving]struct{}{},
		fwd:      newForwarders(log, limits),
		dialer:   newUpstreamDialer(limits),
	}
}

// ErrClosed is returned by Apply after Close.
var ErrClosed = errors.New("proxy is closed")

// Version is the version of the table serving now, "" before the first successful Apply.
func (p *Proxy) Version() string {
	if t := p.cur.Load(); t != nil {
		return t.version
	}
	return ""
}

// Apply builds a routing table from snap, binds any new listener sockets, swaps the table in
// atomically and retires the old one (its modules' Cleanup runs once its in-flight requests have
// finished). If anything fails (a module missing or invalid, a certificate that does not parse, a
// port that cannot be bound) the snapshot is rejected whole, the previous table keeps serving, and
// the error names what failed. Applying the version already serving is a no-op (a snapshot
// without a version is always applied).
func (p *Proxy) Apply(ctx context.Context, snap *irv1.Snapshot) error {
	return p.apply(ctx, snap)
}

// Bound lists the sockets bound now, sorted by name.
func (p *Proxy) Bound() []BoundListener {
	return p.bound()
}

// Close stops accepting on every socket, lets in-flight requests finish until ctx is done (then
// closes their connections), and cleans up every table's modules.
func (p *Proxy) Close(ctx context.Context) error {
	return p.close(ctx)
}
