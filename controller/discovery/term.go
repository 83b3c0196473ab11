package discovery

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/controller"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// term is one leadership term of the discovery server: the controller.Publisher. It keeps the
// latest snapshot, the connected proxies, and for every Gateway the publish sequence at which its
// current generation first appeared; a proxy's acknowledgement is recorded as the sequence of
// the snapshot it acknowledged (versions are content hashes, not sequences). A Gateway generation
// is applied once every proxy serving it has acknowledged a sequence at or after that first one
// and has bound the Gateway's listeners, or reported that it cannot bind them: such listeners are
// reported on their own (Reporter.Unbound) and do not hold the Gateway's other listeners back.
type term struct {
	s      *Server
	log    *zap.Logger
	report controller.Reporter
	wg     sync.WaitGroup // sessions

	mu       sync.Mutex
	closed   bool
	seq      uint64
	latest   *published
	gateways map[gwKey]*gwState
	sessions []*session                  // sorted by node
	cache    map[string]*prepared        // tailored snapshots of latest, by tailoring key
	tailors  map[string]*tailoring       // the tailorings kept across publications, by tailoring key
	catalog  catalog                     // what the latest snapshot's virtual hosts name (facts.go)
	gaps     []controller.RouteModuleGap // the route module gaps last reported
}

// published is one snapshot handed to Publish.
type published struct {
	seq       uint64
	at        time.Time
	snap      *irv1.Snapshot
	facts     *snapshotFacts // its module IDs and each virtual host's clusters
	modules   map[string]bool
	listeners map[gwKey][]string
	sections  map[gwKey]map[string][]string // per Gateway: snapshot listener name → its Gateway listeners
	parents   map[gwKey]gwKey               // per ListenerSet entry: the Gateway it belongs to
}

// latestParents are the ListenerSet parents of the latest snapshot (t.mu held).
func (t *term) latestParents() map[gwKey]gwKey {
	if t.latest == nil {
		return nil
	}
	return t.latest.parents
}

// gwState is what the gate knows of one Gateway's current generation.
type gwState struct {
	gen     *irv1.GatewayGeneration
	first   uint64 // the sequence at which this generation first appeared
	applied bool   // reported Applied
	pending string // the last Pending message reported
	unbound string // a digest of the last Unbound failures reported; "" for none
}

// prepared is a snapshot as one kind of proxy gets it, encoded once for all of them.
type prepared struct {
	once    sync.Once
	snap    *irv1.Snapshot
	version string
	err     error
	gaps    []routeGap // routes this tailoring leaves out or answers 500 for: modules missing

	dataOnce sync.Once
	data     []byte // the encoded snapshot (encoded)
	dataErr  error
	sizeOnce sync.Once
	sizeOf   int
	deltas   deltaCache // this snapshot as deltas against the bases proxies hold (deltas.go)
}

func newTerm(s *Server, report controller.Reporter) *term {
	return &term{s: s, log: s.log, report: report, gateways: map[gwKey]*gwState{}, cache: map[string]*prepared{},
		tailors: map[string]*tailoring{}}
}

var _ controller.Publisher = (*term)(nil)

var errTermEnded = errors.New("leadership ended")

// Publish makes snap the snapshot every proxy converges to. It returns at once: sessions send it
// as soon as their previous push is answered.
func (t *term) Publish(_ context.Context, snap *irv1.Snapshot) error {
	facts := t.catalog.update(snap)
	p := &published{at: time.Now(), snap: snap, facts: facts, modules: facts.modules, listeners: gatewayListeners(snap), sections: gatewaySections(snap), parents: listenerSetParents(snap)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errTermEnded
	}
	t.seq++
	p.seq = t.seq
	t.latest = p
	// The tailorings of the connected proxies are kept for this snapshot (their copies and
	// sealer make the next cut cost the change, even for a proxy that skipped snapshots while
	// it applied an earlier one); those of proxies gone are let go.
	tailors := make(map[string]*tailoring, len(t.tailors))
	for _, s := range t.sessions {
		if tl := t.tailors[s.tailorKey]; tl != nil {
			tailors[s.tailorKey] = tl
		}
	}
	t.tailors = tailors
	t.cache = map[string]*prepared{}
	next := make(map[gwKey]*gwState, len(snap.GetGateways()))
	for _, g := range snap.GetGateways() {
		k := gwKey{g.GetNamespace(), g.GetName()}
		st := t.gateways[k]
		if st == nil || st.gen.GetGeneration() != g.GetGeneration() {
			var unbound string
			if st != nil {
				unbound = st.unbound // what the status writer holds for this Gateway
			}
			st = &gwState{gen: g, first: p.seq, unbound: unbound}
		}
		next[k] = st
	}
	for k, st := range t.gateways {
		if _, ok := next[k]; !ok && st.unbound != "" {
			t.report.Unbound(st.gen, nil) // left the snapshot: its failures with it
		}
	}
	t.gateways = next
	for _, s := range t.sessions {
		s.notify()
	}
	t.evaluate()
	return nil
}

// Close ends the term: new streams are refused, open ones closed (proxies then look for the next
// leader), and it waits for them to finish until ctx is done.
func (t *term) Close(ctx context.Context) error {
	t.s.term.CompareAndSwap(t, nil)
	t.mu.Lock()
	t.closed = true
	for _, s := range t.sessions {
		s.cancel(errTermEnded)
	}
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// add registers a session; a session of the same node (a proxy reconnecting before its old stream
// was noticed dead) is replaced. It returns false once the term is closed.
func (t *term) add(s *session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	for i, old := range t.sessions {
		if old.node == s.node {
			old.cancel(errReplaced)
			t.sessions = append(t.sessions[:i], t.sessions[i+1:]...)
			t.s.metrics.streams.Dec()
			break
		}
	}
	i := sort.Search(len(t.sessions), func(i int) bool { return t.sessions[i].node >= s.node })
	t.sessions = append(t.sessions[:i], append([]*session{s}, t.sessions[i:]...)...)
	t.s.metrics.streams.Inc()
	t.s.metrics.connected(s.node)
	t.log.Info("proxy connected", s.fields()...)
	s.notify()
	t.evaluate()
	return true
}

func (t *term) remove(s *session) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer t.wg.Done()
	for i, cur := range t.sessions {
		if cur == s {
			t.sessions = append(t.sessions[:i], t.sessions[i+1:]...)
			t.s.metrics.streams.Dec()
			t.s.metrics.forget(s.node)
			t.evaluate()
			break
		}
	}
	t.log.Info("proxy disconnected", s.fields()...)
}

// next returns the push s should send now, if any: the latest snapshot, as s's proxy gets it,
// when nothing is in flight and s has not had it yet. A snapshot equal to what the proxy already
// serves counts as acknowledged without being sent.
func (t *term) next(s *session) *discv1.StreamResponse {
	for {
		t.mu.Lock()
		if t.closed || s.inflight != nil || t.latest == nil || s.sentSeq >= t.latest.seq {
			t.mu.Unlock()
			return nil
		}
		p := t.latest
		missing := s.missingFor(p)
		key := tailorKey(s.gw, missing)
		s.tailorKey = key
		prep := t.cache[key]
		if prep == nil {
			prep = &prepared{}
			t.cache[key] = prep
		}
		tl := t.tailors[key]
		if tl == nil && key != "" {
			tl = &tailoring{}
			t.tailors[key] = tl
		}
		base, serving := s.deltaBase(), s.serving
		t.mu.Unlock()

		prep.once.Do(func() { prep.build(p, tl, s.gw, missing, t.s.metrics) })

		// The push's bytes, made outside the lock: a delta against the proxy's base, or the
		// full snapshot (encoded only once some proxy needs it, then shared).
		var data []byte
		var isDelta bool
		if prep.err == nil && prep.version != serving {
			if base != nil {
				data = prep.deltaFrom(base, t.s.metrics) // nil: it goes in full
			}
			if isDelta = data != nil; !isDelta {
				data = prep.encoded()
			}
		}

		t.mu.Lock()
		if t.latest != p {
			t.mu.Unlock()
			continue // superseded while it was prepared
		}
		s.sentSeq = p.seq
		if prep.err != nil {
			t.mu.Unlock()
			t.log.Error("preparing a snapshot for a proxy", append(s.fields(), zap.Error(prep.err))...)
			return nil
		}
		s.last = prep
		if prep.version == s.serving {
			s.acked = flight{seq: p.seq, version: prep.version, prep: prep, at: time.Now()}
			s.base = prep
			t.evaluate()
			t.mu.Unlock()
			continue
		}
		if !isDelta && prep.dataErr != nil {
			t.mu.Unlock()
			t.log.Error("encoding a snapshot for a proxy", append(s.fields(), zap.Error(prep.dataErr))...)
			return nil
		}
		push := &discv1.Push{Snapshot: data, Version: prep.version}
		if isDelta {
			push = &discv1.Push{Delta: data, Version: prep.version}
			t.s.metrics.deltaPushes.Inc()
		}
		s.inflight = &flight{seq: p.seq, version: prep.version, prep: prep, delta: isDelta, sent: time.Now(), due: later(p.at, s.connected)}
		s.lastBytes, s.lastDelta = len(data), isDelta
		t.s.metrics.pushes.Inc()
		t.s.metrics.proxyPushes.WithLabelValues(s.node).Inc()
		t.s.metrics.pushBytes.Add(float64(len(data)))
		t.mu.Unlock()
		return &discv1.StreamResponse{Kind: &discv1.StreamResponse_Push{Push: push}}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func tailorKey(gw *gwKey, missing []string) string {
	if gw == nil && len(missing) == 0 {
		return ""
	}
	var b strings.Builder
	if gw != nil {
		b.WriteString(gw.String())
	}
	b.WriteByte('|')
	b.WriteString(strings.Join(missing, ","))
	return b.String()
}

// build cuts pub's snapshot for one kind of proxy with its tailoring (nil for the snapshot as
// published).
func (p *prepared) build(pub *published, tl *tailoring, gw *gwKey, missing []string, m *metrics) {
	snap := pub.snap
	if tl != nil {
		out, err := tl.tailor(snap, pub.facts, gw, missing)
		if err != nil {
			p.err = err
			return
		}
		if out != snap {
			m.tailored.Inc()
		}
		snap = out
	}
	p.gaps = moduleGaps(pub.snap, pub.facts, gw, missing)
	p.snap, p.version = snap, snap.GetVersion()
}

// encoded is the snapshot's encoding, made by the first push that needs it: when every proxy
// takes deltas, none does. nil when it cannot be encoded (dataErr says why).
func (p *prepared) encoded() []byte {
	p.dataOnce.Do(func() { p.data, p.dataErr = proto.Marshal(p.snap) })
	return p.data
}

// size is the encoding's size, without encoding (a delta must be smaller to be sent).
func (p *prepared) size() int {
	p.sizeOnce.Do(func() { p.sizeOf = proto.Size(p.snap) })
	return p.sizeOf
}

func (t *term) ack(s *session, a *discv1.Ack) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := s.inflight
	if f == nil || f.version != a.GetVersion() {
		t.log.Warn("unexpected acknowledgement", append(s.fields(), zap.String("version", a.GetVersion()))...)
		return
	}
	s.inflight, s.acked, s.serving, s.nack = nil, *f, f.version, nil
	s.base, s.full = f.prep, false
	s.acked.at = time.Now()
	t.s.metrics.acks.Inc()
	t.s.metrics.proxyAcks.WithLabelValues(s.node).Inc()
	t.s.metrics.latency.Observe(s.acked.at.Sub(f.due).Seconds())
	s.notify()
	t.evaluate()
}

func (t *term) nack(s *session, n *discv1.Nack) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := s.inflight
	if f == nil || f.version != n.GetVersion() {
		t.log.Warn("unexpected rejection", append(s.fields(), zap.String("version", n.GetVersion()))...)
		return
	}
	s.inflight = nil
	s.full = true // whatever the proxy holds, the next push replaces it whole
	if f.delta && n.GetReason() == discv1.NackReason_NACK_REASON_DELTA_MISMATCH {
		t.deltaMismatch(s, f, n)
		return
	}
	s.nack = &nacked{seq: f.seq, version: f.version, err: truncate(n.GetError(), 512), at: time.Now()}
	t.s.metrics.nacks.Inc()
	t.s.metrics.proxyNacks.WithLabelValues(s.node).Inc()
	t.log.Warn("proxy rejected a snapshot and keeps serving its previous one",
		append(s.fields(), zap.String("version", f.version), zap.String("error", n.GetError()))...)
	s.notify()
	t.evaluate()
}

func (t *term) nodeStatus(s *session, ns *discv1.NodeStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.bound = map[string]bool{}
	for _, l := range ns.GetListeners() {
		s.bound[l.GetName()] = true
	}
	s.boundList = ns.GetListeners()
	s.failed = map[string]*discv1.ListenerFailure{}
	for _, f := range ns.GetFailedListeners() {
		s.failed[f.GetName()] = f
	}
	s.failedList = ns.GetFailedListeners()
	t.evaluate()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// evaluate runs the Programmed gate over every Gateway whose generation is not applied yet and
// reports what changed. t.mu is held: reports are made in order.
func (t *term) evaluate() {
	var applied []*irv1.GatewayGeneration
	pending := 0
	for k, st := range t.gateways {
		t.reportUnbound(k, st)
		if st.applied {
			continue
		}
		waits := t.awaited(k, st)
		if len(waits) == 0 {
			st.applied = true
			applied = append(applied, st.gen)
			continue
		}
		pending++
		if msg := summarize(waits); msg != st.pending {
			st.pending = msg
			t.report.Pending(st.gen, msg)
		}
	}
	t.s.metrics.pending.Set(float64(pending))
	t.s.metrics.bindFailures.Set(float64(t.countFailures()))
	t.reportGaps()
	if len(applied) > 0 {
		t.report.Applied(applied)
	}
}

// awaited lists what Gateway k's current generation waits for; nothing when it is programmed:
// every proxy serving it (at least one) has acknowledged a snapshot carrying it and has bound its
// listeners or said it cannot (reportUnbound reports those).
func (t *term) awaited(k gwKey, st *gwState) []string {
	var waits []string
	serving := 0
	for _, s := range t.sessions {
		if !s.serves(k) {
			continue
		}
		serving++
		if s.acked.seq < st.first {
			if n := s.nack; n != nil && n.seq >= st.first {
				waits = append(waits, fmt.Sprintf("proxy %s, which rejected snapshot %s (%s)", s.node, n.version, n.err))
			} else {
				waits = append(waits, fmt.Sprintf("proxy %s to acknowledge it", s.node))
			}
			continue
		}
		var unbound []string
		for _, l := range t.latest.listeners[k] {
			if !s.bound[l] && s.failed[l] == nil { // a failed bind is reported, not awaited
				unbound = append(unbound, l)
			}
		}
		if len(unbound) > 0 {
			waits = append(waits, fmt.Sprintf("proxy %s to bind %s", s.node, strings.Join(unbound, ", ")))
		}
	}
	if serving == 0 {
		return []string{"a proxy serving this Gateway to connect"}
	}
	return waits
}

// summarize joins what a Gateway waits for into a condition message of bounded length.
func summarize(waits []string) string {
	const most = 5
	if len(waits) > most {
		waits = append(waits[:most:most], fmt.Sprintf("%d more proxies", len(waits)-most))
	}
	return truncate(strings.Join(waits, "; "), 2048)
}
