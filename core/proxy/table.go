package proxy

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// table is one snapshot compiled for serving. It is immutable once built but for its version and
// its clusters' endpoint sets, which a snapshot differing only in endpoints updates in place
// (fastApply). Its reference count holds one reference for being current and one per request in
// flight on it; when it has been retired and the last request ends, the modules it loaded are
// cleaned up.
type table struct {
	version   atomic.Pointer[string] // of the last snapshot applied to it
	shape     shape                  // of the snapshot it was built from (shapeOf)
	log       *zap.Logger
	bc        *core.BuildContext
	listeners []*builtListener // in snapshot order
	clusters  []*cluster       // in snapshot order
	certKeys  map[certKey]struct{}
	tlsKeys   map[certKey]struct{} // of the clusters' upstreamTLS
	// noRoute answers, in their own protocol, the unrouted requests they claim (gRPC); one per
	// route module ID the table loaded that implements core.HTTPProtocolErrorWriter.
	noRoute    []core.HTTPProtocolErrorWriter
	noRouteIDs map[string]bool
	// acme are the ACME validations answered (acme.go); nil when there are none.
	acme *acmeChallenges
	// reqSeries and held are the request series this table holds (reqmetrics.go), released when
	// it closes; nil when request metrics are off.
	reqSeries *requestSeries
	held      obsHeld
	// servers are its servers in build order, each holding its virtual hosts, and clusterSet its
	// clusters: what it shares with the tables before and after it that have them unchanged
	// (reuse.go, vhostreuse.go). byName are its clusters by name, secrets the sum of the secrets
	// it was built with.
	servers    []*server
	clusterSet *clusterSet
	byName     map[string]*cluster
	secrets    sum
	// breakers are the circuit breaker sets of its routes, by cluster: given each cluster's
	// endpoints at every swap and in-place update.
	breakers map[*cluster][]*breakerSet
	// updates are the endpoint changes of shared clusters, made when it is swapped in.
	updates []endpointUpdate

	refs      atomic.Int64
	closeOnce sync.Once
	closed    atomic.Bool
}

// builtListener is an IR listener with its module and compiled state.
type builtListener struct {
	ir     *irv1.Listener // without its servers (listenerHead)
	key    sockKey
	module core.ModuleID
	sl     StreamListener
	state  *ListenerState
}

// tryAcquire takes a request reference; it fails once the table has drained after retirement, and
// the caller then reads the socket's (newer) state again.
func (t *table) tryAcquire() bool {
	for {
		n := t.refs.Load()
		if n == 0 {
			return false
		}
		if t.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release drops a reference; the last one closes the table, off the request's goroutine so that
// module cleanup never delays a response.
func (t *table) release() {
	if t.refs.Add(-1) == 0 {
		go t.close()
	}
}

// retire drops the reference held for being current.
func (t *table) retire() { t.release() }

// close runs the Cleanup of every module the table loaded, once.
func (t *table) close() {
	t.closeOnce.Do(func() {
		t.cleanup()
		// Nothing serves from a closed table, but the Proxy lists it among the retired until its
		// next Apply: let its routes go now, not one snapshot later (a second table's worth of
		// memory on an idle proxy).
		t.listeners, t.clusters, t.noRoute, t.noRouteIDs, t.certKeys, t.tlsKeys = nil, nil, nil, nil, nil, nil
		t.servers, t.clusterSet, t.byName, t.breakers, t.updates = nil, nil, nil, nil, nil
		t.closed.Store(true)
	})
}

// cleanup runs the Cleanup of the modules t loaded itself, releases its series and drops its
// hold on its parts, newest first (the last table holding a part cleans it up).
func (t *table) cleanup() {
	if err := t.bc.Close(); err != nil {
		t.log.Warn("module cleanup failed", zap.String("version", t.ver()), zap.Error(err))
	}
	t.reqSeries.release(&t.held)
	for i := len(t.servers) - 1; i >= 0; i-- {
		runs := t.servers[i].runs
		for j := len(runs) - 1; j >= 0; j-- {
			runs[j].release(t.log)
		}
	}
	if t.clusterSet != nil {
		t.clusterSet.release(t.log)
	}
	t.servers, t.clusterSet = nil, nil
}

// ver is the version of the last snapshot applied to t.
func (t *table) ver() string {
	if v := t.version.Load(); v != nil {
		return *v
	}
	return ""
}

// builder compiles one snapshot into a table.
type builder struct {
	p        *Proxy
	bc       *core.BuildContext
	t        *table
	secrets  map[string]*irv1.Secret
	clusters map[string]*cluster
	// prev is the serving table's endpoints by cluster name (made on first use): a new table
	// reuses those that did not change, so that their in-flight counters (Endpoint.Active) go on
	// counting the old table's requests, which a least-connection balancer must see.
	prev map[string][]*core.Endpoint
	// gateway names the Gateway of the Server being built, for its routes' series.
	gateway string

	// Sharing with the serving table (reuse.go, vhostreuse.go). digest has the snapshot's
	// route, virtual host and cluster sums in the order they are visited; serving is the table
	// serving now, nil for a full build.
	digest   *digest
	clusterN int // clusters visited so far
	// routeSums are the route sums of the virtual host being compiled, routeN its routes so far.
	routeSums []sum
	routeN    int
	serving   *table
	gen       uint64 // this build's number (Proxy.builds)
	// sameClusters: the table took the serving table's cluster set whole.
	sameClusters bool
	// api and listenerID are the route API and module of the listener being built.
	api        RouteAPI
	listenerID string
	// serverIndex is the serving table's servers by listener and hostname, made when one was
	// not at its place; moved are the virtual hosts this build listed in new runs, with their
	// serving runs (revertMoves).
	serverIndex map[serverKey]*server
	moved       []movedVhost
	// vh is the virtual host being compiled and old the serving one it replaces (nil for none),
	// next where in old's routes the next route likely is; cur is the route being compiled.
	vh   *builtVhost
	old  *builtVhost
	next int
	cur  *builtRoute
}

// previousEndpoints returns the endpoints the serving table has for the cluster name.
func (b *builder) previousEndpoints(name string) []*core.Endpoint {
	if b.prev == nil {
		b.prev = map[string][]*core.Endpoint{}
		if cur := b.p.cur.Load(); cur != nil {
			for _, cl := range cur.clusters {
				b.prev[cl.name] = cl.set.Load().eps
			}
		}
	}
	return b.prev[name]
}

// build compiles snap. On error the caller closes the BuildContext, which cleans up whatever was
// loaded so far.
func (p *Proxy) build(ctx context.Context, snap *irv1.Snapshot, d *digest) (*table, error) {
	bc := p.newBuildContext(ctx, snap)
	t := &table{log: p.log, bc: bc, certKeys: map[certKey]struct{}{}, tlsKeys: map[certKey]struct{}{}}
	v := snap.GetVersion()
	t.version.Store(&v)
	t.refs.Store(1)
	p.builds++
	b := &builder{p: p, bc: bc, t: t, secrets: map[string]*irv1.Secret{}, digest: d, gen: p.builds}
	if !p.fullBuilds {
		b.serving = p.cur.Load()
	}
	if d != nil {
		t.secrets = d.secrets
	}
	if s := b.serving; s != nil && d != nil && d.sameClusters && d.secrets == s.secrets {
		// No cluster and no secret changed: the serving table's clusters, as they are.
		t.clusters, t.byName, t.tlsKeys, t.clusterSet = s.clusters, s.byName, s.tlsKeys, s.clusterSet
		t.clusterSet.refs.Add(1)
		b.clusters, b.sameClusters = s.byName, true
	} else {
		t.clusterSet = newClusterSet()
		b.clusters = make(map[string]*cluster, len(snap.GetClusters()))
		t.byName = b.clusters // the next build looks the clusters it may share up here
	}
	bc.Clusters = b
	err := b.build(snap)
	// The table keeps the BuildContext for cleanup only: it must not keep the decoded snapshot
	// (at 10,000 routes ≈40% of the heap a proxy would otherwise hold) alive as long as it serves.
	bc.Snapshot, bc.Clusters = nil, nil // nor the builder's maps: modules look clusters up in Provision
	if err != nil {
		b.revertMoves()
		t.cleanup() // what was loaded so far, and the holds on shared parts
		return nil, err
	}
	return t, nil
}

// newBuildContext is a BuildContext with what the proxy gives every module: the shared state,
// module settings, metrics registry and access log. A table has one, and so has each part it
// may share with the next (reuse.go).
func (p *Proxy) newBuildContext(ctx context.Context, snap *irv1.Snapshot) *core.BuildContext {
	bc := core.NewBuildContext(ctx, p.log, p.reg, snap)
	bc.Shared, bc.Settings, bc.Metrics, bc.AccessLog = p.shared, p.settings, p.metrics, p.accessLog
	return bc
}

func (b *builder) build(snap *irv1.Snapshot) error {
	for _, s := range snap.GetSecrets() {
		if _, dup := b.secrets[s.GetName()]; dup {
			return fmt.Errorf("secret %s listed twice", s.GetName())
		}
		b.secrets[s.GetName()] = s
	}
	acme, err := compileACME(snap.GetAcmeChallenges())
	if err != nil {
		return err
	}
	b.t.acme = acme
	for _, c := range snap.GetClusters() {
		if b.sameClusters {
			break // built before, from the same messages
		}
		if err := b.cluster(c); err != nil {
			return fmt.Errorf("cluster %s: %w", c.GetName(), err)
		}
	}
	seen := map[sockKey]string{}
	for _, l := range snap.GetListeners() {
		bl, err := b.listener(l)
		if err != nil {
			return fmt.Errorf("listener %s: %w", l.GetName(), err)
		}
		if other, dup := seen[bl.key]; dup {
			return fmt.Errorf("listener %s: same socket as listener %s", l.GetName(), other)
		}
		seen[bl.key] = l.GetName()
		b.t.listeners = append(b.t.listeners, bl)
		if l.GetHttp3() == nil {
			continue
		}
		h3, err := b.http3Listener(l, bl)
		if err != nil {
			return fmt.Errorf("listener %s: %w", l.GetName(), err)
		}
		if other, dup := seen[h3.key]; dup {
			return fmt.Errorf("listener %s: its HTTP/3 socket is the socket of listener %s", l.GetName(), other)
		}
		seen[h3.key] = h3.ir.GetName()
		b.t.listeners = append(b.t.listeners, h3)
	}
	return nil
}

// listener loads the listener module and compiles the listener's servers.
func (b *builder) listener(l *irv1.Listener) (*builtListener, error) {
	id := core.ModuleID("listener." + strings.ToLower(l.GetProtocol()))
	sl, err := core.Load[StreamListener](b.bc, &irv1.ModuleConfig{Id: string(id)})
	if err != nil {
		return nil, err
	}
	if err := sl.Check(l); err != nil {
		return nil, fmt.Errorf("module %s: %w", id, err)
	}
	ls := &ListenerState{Name: l.GetName(), Protocol: l.GetProtocol(), table: b.t,
		proxyProtocol: proxyProtocolOf(l.GetProxyProtocol()),
		xffHops:       l.GetClientIpDetection().GetXffNumTrustedHops()}
	b.api, b.listenerID = routeAPIOf(sl), string(id) // every route compiled is checked against it
	for _, s := range l.GetServers() {
		srv, err := b.server(ls, s)
		if err == nil {
			err = b.listenerFilters(ls, srv, s)
		}
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", s.GetHostname(), err)
		}
		if err := ls.servers.add(s.GetHostname(), srv); err != nil {
			return nil, err
		}
		if s.GetTls() == nil || s.GetTls().GetMode() == irv1.TLS_PASSTHROUGH {
			continue // a passthrough server presents the backend's certificate
		}
		sc, err := b.serverCerts(s)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", s.GetHostname(), err)
		}
		if v := s.GetTls().GetClientValidation(); v != nil {
			cv, err := newClientValidation(v, sc.certs)
			if err != nil {
				return nil, fmt.Errorf("server %q: %w", s.GetHostname(), err)
			}
			srv.cv, sc.cv = cv, cv
		}
		_ = ls.certs.add(s.GetHostname(), sc) // duplicates were rejected just above
		// A Server still waiting for its ACME certificate has none: it is no fallback.
		if ls.firstTLS == nil && len(sc.certs) > 0 {
			ls.firstTLS = sc
		}
	}
	if err := b.observeListener(ls, routeAPIOf(sl) == RouteAPIHTTP); err != nil {
		return nil, err
	}
	key := sockKey{address: l.GetAddress(), port: l.GetPort(), network: networkOf(sl)}
	return &builtListener{ir: listenerHead(l), key: key, module: id, sl: sl, state: ls}, nil
}

// listenerHead is l without its servers: what a built listener needs of its IR after the build
// (its name, address and protocol), without keeping every route's decoded IR alive.
func listenerHead(l *irv1.Listener) *irv1.Listener {
	return &irv1.Listener{Name: l.GetName(), Address: l.GetAddress(), Port: l.GetPort(), Protocol: l.GetProtocol()}
}

// server compiles s, a server of the listener ls, sharing the unchanged virtual hosts of the
// serving table's server it replaces (vhostreuse.go).
func (b *builder) server(ls *ListenerState, s *irv1.Server) (*server, error) {
	srv := &server{hostname: s.GetHostname(), tls: s.GetTls(), listener: ls.Name, gateway: gatewayOf(s.GetSources()), api: b.api}
	b.t.servers = append(b.t.servers, srv) // now: a failed build releases its virtual hosts
	b.gateway = srv.gateway
	if err := b.vhosts(srv, b.baseServer(srv), s); err != nil {
		return nil, err
	}
	return srv, nil
}

// serverCerts parses (or takes from the proxy's cache) the certificates a TLS server names.
func (b *builder) serverCerts(s *irv1.Server) (*serverCerts, error) {
	tlsCfg := s.GetTls()
	if tlsCfg.GetMode() != irv1.TLS_TERMINATE {
		return nil, fmt.Errorf("TLS mode %s is not served by an HTTP listener", tlsCfg.GetMode())
	}
	sc := &serverCerts{hostname: s.GetHostname()}
	for _, name := range tlsCfg.GetCertificates() {
		sec, ok := b.secrets[name]
		if !ok {
			return nil, fmt.Errorf("certificate secret %s is not in the snapshot", name)
		}
		key := newCertKey(sec)
		cert, err := b.p.certs.get(key, sec)
		if err != nil {
			return nil, fmt.Errorf("certificate secret %s: %w", name, err)
		}
		b.t.certKeys[key] = struct{}{}
		sc.certs = append(sc.certs, cert)
	}
	return sc, nil
}

// certKey identifies certificate material by content, so that a reload re-parses only what changed.
type certKey [sha256.Size]byte

func newCertKey(s *irv1.Secret) certKey {
	h := sha256.New()
	var n [8]byte
	l := len(s.GetCertificatePem())
	for i := range n {
		n[i] = byte(l >> (8 * i))
	}
	h.Write(n[:])
	h.Write(s.GetCertificatePem())
	h.Write(s.GetPrivateKeyPem())
	var k certKey
	h.Sum(k[:0])
	return k
}
