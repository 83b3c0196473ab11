// Package agent is the proxy side of the discovery protocol (core/discovery/v1): it gets an SVID
// with the proxy's ServiceAccount token, holds one mutual-TLS stream to the leading controller,
// applies every snapshot it is sent to the engine and acknowledges (or rejects) it, and reports
// the listeners the engine has bound and those it could not bind (NodeStatus), again whenever
// that changes: a port freed later and bound by the engine's retry is reported without a push. While disconnected the engine keeps serving its last
// snapshot; the agent reconnects with backoff, trying each discovery address in turn, so it
// finds a new leader after a failover. It holds no Kubernetes credentials and imports no
// Kubernetes code.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// Engine is what the agent drives: *proxy.Proxy.
type Engine interface {
	Apply(ctx context.Context, snap *irv1.Snapshot) error
	Version() string
	Bound() []proxy.BoundListener
	Failed() []proxy.ListenerFailure
	ListenersChanged() <-chan struct{}
}

var _ Engine = (*proxy.Proxy)(nil)

// Options configure an Agent. Log, Engine, Addresses, TokenFile, TrustBundleFile and Node are
// required.
type Options struct {
	Log    *zap.Logger
	Engine Engine
	// Modules are the module IDs compiled into the binary, announced in Hello.
	Modules []string
	// Addresses are the controllers' discovery addresses ("host:port"). A host name resolving to
	// several addresses (a headless Service) stands for all of them; each connection attempt
	// takes the next one, so a standby's refusal sends the proxy on to the leader.
	Addresses []string
	// TokenFile holds the projected ServiceAccount token (audience "coxswain-discovery").
	TokenFile string
	// TrustBundleFile holds the PEM CA certificates the controller's certificate must chain to.
	TrustBundleFile string
	// Node is the proxy's unique name in the fleet (the pod name).
	Node string
	// Gateway is "<namespace>/<name>" for a dedicated proxy, empty for a shared one.
	Gateway string
	// ListenAddress, when set, is bound by the snapshot listeners that name no address (as a pod
	// binding only its own IP would); empty binds every local address.
	ListenAddress string
	// Build is the binary's version, shown in the controller's fleet view.
	Build string
	// Metrics receives the agent's series; none are registered when nil.
	Metrics prometheus.Registerer
	// MinBackoff and MaxBackoff bound the reconnection delay (100ms and 5s when zero).
	MinBackoff, MaxBackoff time.Duration
	// FullSnapshots makes the agent announce no delta support, so every push is a full
	// snapshot, as proxies built before deltas get; it then keeps no copy of the snapshot.
	FullSnapshots bool
}

// MaxSnapshotBytes is the largest snapshot a proxy accepts.
const MaxSnapshotBytes = 256 << 20

// Agent is the proxy's discovery client.
type Agent struct {
	opts    Options
	log     *zap.Logger
	metrics *metrics
	gateway *discv1.GatewayRef
	id      identity

	ready     atomic.Bool
	connected atomic.Bool
	// lastSync and disconnectedAt are unix nanoseconds (0: never; connected); streamsEnded counts
	// the streams that ended or failed to open, as the reconnects metric does.
	lastSync       atomic.Int64
	disconnectedAt atomic.Int64
	streamsEnded   atomic.Int64

	// base is the snapshot last applied as the controller sent it (before localize), which the
	// next delta changes; sealer checks a rebuilt snapshot's version with the encodings of the
	// parts it shares with base. Only the session goroutine touches them, one push at a time.
	base     *irv1.Snapshot
	sealer   irv1.Sealer
	unprimed bool // base came in full and the sealer has not seen it yet (primeSealer)

	mu      sync.Mutex
	addrs   []string // resolved addresses of the current round
	next    int
	leader  string // the address of the current stream
	lastErr string
}

// New checks opts and returns an Agent; Run starts it.
func New(opts Options) (*Agent, error) {
	var missing []string
	for name, v := range map[string]bool{"Log": opts.Log != nil, "Engine": opts.Engine != nil, "Addresses": len(opts.Addresses) > 0,
		"TokenFile": opts.TokenFile != "", "TrustBundleFile": opts.TrustBundleFile != "", "Node": opts.Node != ""} {
		if !v {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("discovery agent: missing %s", strings.Join(missing, ", "))
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	a := &Agent{opts: opts, log: opts.Log, metrics: newMetrics(opts.Metrics), sealer: irv1.Sealer{SkipRoutes: true}}
	a.disconnectedAt.Store(time.Now().UnixNano())
	if opts.Gateway != "" {
		ns, name, ok := strings.Cut(opts.Gateway, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("gateway %q is not <namespace>/<name>", opts.Gateway)
		}
		a.gateway = &discv1.GatewayRef{Namespace: ns, Name: name}
	}
	return a, nil
}

// Ready reports whether the first snapshot has been applied (its listeners are then bound).
func (a *Agent) Ready() bool { return a.ready.Load() }

// Connected reports whether a stream to the leader is open.
func (a *Agent) Connected() bool { return a.connected.Load() }

// Status describes the agent for the admin endpoints.
type Status struct {
	Connected  bool      `json:"connected"`
	Controller string    `json:"controller,omitempty"`
	Version    string    `json:"version,omitempty"`
	SPIFFEID   string    `json:"spiffeID,omitempty"`
	CertUntil  time.Time `json:"certificateNotAfter,omitzero"`
	LastError  string    `json:"lastError,omitempty"`
	// DisconnectedSince is when the last stream to the leader ended (or the agent started), while
	// no stream is open: the proxy serves its last snapshot meanwhile.
	DisconnectedSince time.Time `json:"disconnectedSince,omitzero"`
	// LastSync is when the last snapshot the leader pushed was applied; a reconnect that resynced
	// moves it (the leader pushes its current snapshot on every new stream).
	LastSync           time.Time `json:"lastSync,omitzero"`
	LastSyncAgeSeconds float64   `json:"lastSyncAgeSeconds,omitempty"`
	// Reconnects counts the streams that ended or failed to open.
	Reconnects int64 `json:"reconnects"`
	// FailedListeners are the snapshot's listeners the engine could not bind (and retries).
	FailedListeners []proxy.ListenerFailure `json:"failedListeners,omitempty"`
}

// Status returns the agent's current state.
func (a *Agent) Status() Status {
	st := Status{Connected: a.connected.Load(), Version: a.opts.Engine.Version(), FailedListeners: a.opts.Engine.Failed(),
		Reconnects: a.streamsEnded.Load()}
	if at := a.disconnectedAt.Load(); at != 0 && !st.Connected {
		st.DisconnectedSince = time.Unix(0, at)
	}
	if at := a.lastSync.Load(); at != 0 {
		st.LastSync = time.Unix(0, at)
		st.LastSyncAgeSeconds = time.Since(st.LastSync).Seconds()
	}
	if c, id := a.id.current(); c != nil {
		st.SPIFFEID, st.CertUntil = id.String(), c.Leaf.NotAfter
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st.Controller, st.LastError = a.leader, a.lastErr
	return st
}

// Run connects and reconnects until ctx is done. The engine is never closed here.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { a.renew(ctx) })
	wg.Go(func() { a.watchListeners(ctx) })
	rounds := 0 // rounds of addresses that all failed in a row
	for ctx.Err() == nil {
		addr, last := a.nextAddress(ctx)
		progressed, err := a.session(ctx, addr)
		if ctx.Err() != nil {
			break
		}
		if progressed {
			rounds = 0
		}
		a.recordError(addr, err)
		a.metrics.reconnects.Inc()
		a.streamsEnded.Add(1)
		if status.Code(err) == codes.FailedPrecondition {
			a.log.Info("controller is a standby; trying the next address", zap.String("address", addr))
		} else {
			a.log.Warn("discovery stream ended", zap.String("address", addr), zap.Error(err))
		}
		if !last && !progressed {
			continue // try the rest of the round at once: one of them may lead
		}
		rounds++
		wait := backoff(rounds, a.opts.MinBackoff, a.opts.MaxBackoff)
		a.log.Debug("retrying", zap.Duration("in", wait))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

func (a *Agent) recordError(addr string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.lastErr = fmt.Sprintf("%s: %v", addr, err)
	}
}

// backoff is the delay before attempt n (from 1): doubling from lo up to hi, with ±20% jitter so
// a fleet does not reconnect in lockstep.
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// nextAddress is the address of the next attempt, and whether it is the last of its round;
// host names are resolved afresh at the start of every round.
func (a *Agent) nextAddress(ctx context.Context) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= len(a.addrs) {
		a.addrs, a.next = resolve(ctx, a.opts.Addresses), 0
	}
	addr := a.addrs[a.next]
	a.next++
	return addr, a.next >= len(a.addrs)
}

// anyAddress is an address to bootstrap at: the leader's when connected, else the next one.
func (a *Agent) anyAddress(ctx context.Context) string {
	a.mu.Lock()
	leader := a.leader
	a.mu.Unlock()
	if leader != "" && a.connected.Load() {
		return leader
	}
	addr, _ := a.nextAddress(ctx)
	return addr
}

func resolve(ctx context.Context, addrs []string) []string {
	var out []string
	for _, hp := range addrs {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || net.ParseIP(host) != nil {
			out = append(out, hp)
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		cancel()
		if err != nil || len(ips) == 0 {
			out = append(out, hp) // let the dial report it
			continue
		}
		sort.Strings(ips)
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, port))
		}
	}
	return out
}

// session runs one stream to addr until it ends. progressed says a snapshot was received: the
// controller at addr was the leader, and backoff starts over.
func (a *Agent) session(ctx context.Context, addr string) (progressed bool, err error) {
	if c, _ := a.id.current(); !usable(c, time.Now()) {
		if err := a.bootstrap(ctx, addr); err != nil {
			return false, err
		}
	}
	roots, err := a.roots()
	if err != nil {
		return false, err
	}
	_, id := a.id.current()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(credentials.NewTLS(a.tlsConfig(roots, id.TrustDomain, true))),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxSnapshotBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		return false, err
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := discv1.NewDiscoveryServiceClient(conn).Stream(ctx)
	if err != nil {
		return false, err
	}
	out := &sender{stream: stream}
	if err := out.send(a.hello()); err != nil {
		return false, recvErr(stream, err)
	}
	changed := a.opts.Engine.ListenersChanged() // before reading them: no change slips between
	if err := out.status(a.opts.Engine, true); err != nil {
		return false, recvErr(stream, err)
	}
	go a.reportChanges(ctx, out, changed)
	leading := false
	defer func() {
		if leading {
			a.setLeader("")
		}
	}()
	// The leader's header says the stream is accepted before any Push (there is none when this
	// proxy already serves the current snapshot); a controller of an older build sends its
	// headers with the first Push, and a standby none before ending the stream.
	if md, err := stream.Header(); err == nil && len(md.Get(discv1.LeaderHeader)) > 0 {
		leading = true
		a.setLeader(addr)
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return progressed, err
		}
		if !leading {
			leading = true
			a.setLeader(addr)
		}
		push := msg.GetPush()
		if push == nil {
			continue // a message kind of a newer revision
		}
		progressed = true
		if err := out.reply(a.opts.Engine, a.apply(ctx, push)); err != nil {
			return progressed, recvErr(stream, err)
		}
		a.primeSealer()
	}
}

// reportChanges sends a NodeStatus whenever the engine's bound or failed listeners change
// outside a push (a retried bind that succeeded), until ctx ends with the session.
func (a *Agent) reportChanges(ctx context.Context, out *sender, changed <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = a.opts.Engine.ListenersChanged()
		if err := out.status(a.opts.Engine, false); err != nil {
			return // the stream is broken: the session's Recv returns why
		}
	}
}

// watchListeners keeps the failed-listener gauge current, connected or not.
func (a *Agent) watchListeners(ctx context.Context) {
	for {
		changed := a.opts.Engine.ListenersChanged()
		a.metrics.listenersFailed.Set(float64(len(a.opts.Engine.Failed())))
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// sender serializes a stream's sends (the session's replies and reportChanges' NodeStatus) and
// remembers the listeners last reported, so NodeStatus goes out only when they changed.
type sender struct {
	stream discv1.DiscoveryService_StreamClient
	mu     sync.Mutex
	bound  []proxy.BoundListener
	failed []proxy.ListenerFailure
	sent   bool
}

func (s *sender) send(req *discv1.StreamRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stream.Send(req)
}

// status sends a NodeStatus when the engine's listeners differ from the last one sent, or always.
func (s *sender) status(e Engine, always bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusLocked(e, always)
}

func (s *sender) statusLocked(e Engine, always bool) error {
	bound, failed := e.Bound(), e.Failed()
	if s.sent && !always && equalBound(bound, s.bound) && equalFailed(failed, s.failed) {
		return nil
	}
	if err := s.stream.Send(nodeStatus(bound, failed)); err != nil {
		return err
	}
	s.bound, s.failed, s.sent = bound, failed, true
	return nil
}

// reply sends an Ack preceded by a NodeStatus when the listeners changed (the controller then
// sees the binds of the snapshot it is acknowledged for), or a Nack.
func (s *sender) reply(e Engine, req *discv1.StreamRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if req.GetAck() != nil {
		if err := s.statusLocked(e, false); err != nil {
			return err
		}
	}
	return s.stream.Send(req)
}

// recvErr turns a failed Send into the stream's real status: Send says only io.EOF when the
// server ended the stream, and Recv returns why.
func recvErr(stream discv1.DiscoveryService_StreamClient, err error) error {
	if errors.Is(err, io.EOF) {
		if _, rerr := stream.Recv(); rerr != nil {
			return rerr
		}
	}
	return err
}

func (a *Agent) setLeader(addr string) {
	a.mu.Lock()
	a.leader = addr
	if addr != "" {
		a.lastErr = ""
	}
	a.mu.Unlock()
	a.connected.Store(addr != "")
	if addr != "" {
		a.disconnectedAt.Store(0)
		a.metrics.connected.Set(1)
		a.log.Info("connected to the discovery leader", zap.String("address", addr))
	} else {
		a.disconnectedAt.Store(time.Now().UnixNano())
		a.metrics.connected.Set(0)
		a.log.Warn("disconnected from the discovery leader; serving the last snapshot until a stream is back",
			zap.String("version", a.opts.Engine.Version()))
	}
}

func (a *Agent) hello() *discv1.StreamRequest {
	mode := discv1.Mode_MODE_SHARED
	if a.gateway != nil {
		mode = discv1.Mode_MODE_DEDICATED
	}
	mods := append([]string(nil), a.opts.Modules...)
	sort.Strings(mods)
	return &discv1.StreamRequest{Kind: &discv1.StreamRequest_Hello{Hello: &discv1.Hello{
		WireVersion: discv1.WireVersion_WIRE_VERSION_1, Node: a.opts.Node, Mode: mode, Gateway: a.gateway,
		Modules: mods, Version: a.opts.Engine.Version(), Build: a.opts.Build, Deltas: !a.opts.FullSnapshots,
	}}}
}

func nodeStatus(bound []proxy.BoundListener, failed []proxy.ListenerFailure) *discv1.StreamRequest {
	ns := &discv1.NodeStatus{}
	for _, b := range bound {
		ns.Listeners = append(ns.Listeners, &discv1.BoundListener{Name: b.Name, Protocol: b.Protocol, Address: b.Address})
	}
	for _, f := range failed {
		ns.FailedListeners = append(ns.FailedListeners, &discv1.ListenerFailure{Name: f.Name, Address: f.Address,
			Reason: bindReasons[f.Reason], Message: f.Error})
	}
	return &discv1.StreamRequest{Kind: &discv1.StreamRequest_NodeStatus{NodeStatus: ns}}
}

var bindReasons = map[proxy.BindReason]discv1.BindFailureReason{
	proxy.BindAddressInUse:        discv1.BindFailureReason_BIND_FAILURE_REASON_ADDRESS_IN_USE,
	proxy.BindAddressNotAvailable: discv1.BindFailureReason_BIND_FAILURE_REASON_ADDRESS_NOT_AVAILABLE,
	proxy.BindPermissionDenied:    discv1.BindFailureReason_BIND_FAILURE_REASON_PERMISSION_DENIED,
}

// apply applies one push and returns the reply: the Ack, or a Nack when the snapshot could not be
// decoded, rebuilt from a delta or built (the engine keeps its previous table). Listeners the
// engine could not bind do not make it a Nack: the NodeStatus sent before the Ack lists them.
func (a *Agent) apply(ctx context.Context, push *discv1.Push) *discv1.StreamRequest {
	received := time.Now()
	var snap *irv1.Snapshot
	if len(push.GetDelta()) > 0 {
		rebuilt, err := a.rebuild(push)
		if err != nil {
			return a.deltaMismatch(push, err)
		}
		snap = rebuilt
	} else {
		snap = &irv1.Snapshot{}
		if err := proto.Unmarshal(push.GetSnapshot(), snap); err != nil {
			return a.nack(push, fmt.Errorf("decoding: %w", err))
		}
		if snap.GetVersion() != push.GetVersion() {
			return a.nack(push, fmt.Errorf("snapshot says version %q, push says %q", snap.GetVersion(), push.GetVersion()))
		}
	}
	start := time.Now()
	if err := a.opts.Engine.Apply(ctx, a.localize(snap)); err != nil {
		return a.nack(push, err)
	}
	a.keepBase(snap, len(push.GetDelta()) > 0)
	a.metrics.applied.Inc()
	a.metrics.applySeconds.Observe(time.Since(start).Seconds())
	if len(push.GetDelta()) > 0 {
		a.metrics.deltasApplied.Inc()
	} else {
		a.metrics.snapshotBytes.Set(float64(len(push.GetSnapshot())))
	}
	now := time.Now()
	a.lastSync.Store(now.UnixNano())
	a.metrics.lastSync.Set(float64(now.UnixNano()) / 1e9)
	a.ready.Store(true)
	// Where a push's time on the proxy went: decoding it (a delta: rebuilding and resealing the
	// snapshot) and the engine's apply. With the controller's "published" line this places
	// the wire between them (docs/controller.md, session 15).
	a.log.Info("push applied", zap.String("version", snap.GetVersion()), zap.Bool("delta", len(push.GetDelta()) > 0),
		zap.Duration("decoded", start.Sub(received)), zap.Duration("applied", now.Sub(start)))
	return &discv1.StreamRequest{Kind: &discv1.StreamRequest_Ack{Ack: &discv1.Ack{Version: snap.GetVersion()}}}
}

// nack rejects a push the proxy cannot serve: the controller does not send that version again.
func (a *Agent) nack(push *discv1.Push, err error) *discv1.StreamRequest {
	a.metrics.rejected.Inc()
	a.log.Warn("snapshot rejected; serving the previous one", zap.String("version", push.GetVersion()), zap.Error(err))
	return &discv1.StreamRequest{Kind: &discv1.StreamRequest_Nack{Nack: &discv1.Nack{Version: push.GetVersion(), Error: err.Error()}}}
}

// localize binds unaddressed listeners to ListenAddress, in copies: snap stays the controller's
// (the base of the next delta, which must seal to the controller's versions). The version stays
// the controller's too: it names what was sent, and the listener names (what NodeStatus
// reports) do not change.
func (a *Agent) localize(snap *irv1.Snapshot) *irv1.Snapshot {
	if a.opts.ListenAddress == "" {
		return snap
	}
	out := irv1.Shallow(snap)
	out.Listeners = make([]*irv1.Listener, len(snap.GetListeners()))
	for i, l := range snap.GetListeners() {
		if l.GetAddress() == "" {
			l = irv1.Shallow(l)
			l.Address = a.opts.ListenAddress
		}
		out.Listeners[i] = l
	}
	return out
}

func equalFailed(a, b []proxy.ListenerFailure) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		// Attempts and the retry time change at every retry; what the controller sees does not.
		if a[i].Name != b[i].Name || a[i].Address != b[i].Address || a[i].Reason != b[i].Reason || a[i].Error != b[i].Error {
			return false
		}
	}
	return true
}

func equalBound(a, b []proxy.BoundListener) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
