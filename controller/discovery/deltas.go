package discovery

import (
	"sync"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/core/discovery/delta"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Deltas: a proxy that announced them (Hello.deltas) is sent each snapshot as its changes
// against the snapshot it acknowledged last, its base. It gets the snapshot in full instead on a
// new stream (the controller does not know what it holds unless it serves the current version),
// after any Nack, and when the delta would not be smaller. The proxy rebuilds the snapshot,
// reseals it and compares the version; when it cannot, it answers a Nack with reason
// NACK_REASON_DELTA_MISMATCH and gets the same version in full. Acks, Nacks and the gate are
// the same for both kinds of push: they name versions, whatever carried them.

// deltaCache is one prepared snapshot's deltas, by base version: a fleet converging on the
// same snapshots holds one or two bases, so a publication costs one Diff and one encoding per
// base, shared by every proxy at it, as the full encoding is.
type deltaCache struct {
	mu     sync.Mutex
	byBase map[string]*encodedDelta
}

type encodedDelta struct {
	once sync.Once
	data []byte // nil: the snapshot goes in full
}

// deltaBase is what a push to s may be a delta against: nil when it must go in full (t.mu held).
func (s *session) deltaBase() *prepared {
	if !s.deltas || s.full || s.base == nil || s.base.snap == nil {
		return nil
	}
	return s.base
}

// deltaFrom is p encoded as a delta against base, or nil when p goes in full: the delta would not
// be smaller, or Diff cannot describe p against base (names repeated in a list).
func (p *prepared) deltaFrom(base *prepared, m *metrics) []byte {
	p.deltas.mu.Lock()
	if p.deltas.byBase == nil {
		p.deltas.byBase = map[string]*encodedDelta{}
	}
	e := p.deltas.byBase[base.version]
	if e == nil {
		e = &encodedDelta{}
		p.deltas.byBase[base.version] = e
	}
	p.deltas.mu.Unlock()
	e.once.Do(func() {
		d, err := delta.Diff(base.snap, p.snap)
		if err != nil {
			return
		}
		b, err := proto.Marshal(d)
		if err != nil || !p.larger(len(b)) {
			return
		}
		e.data = b
		m.deltasEncoded.Inc()
	})
	return e.data
}

// deltaMismatch handles a proxy that could not rebuild f's snapshot from its delta: not a
// rejection of the snapshot (the gate and the fleet view do not show it as one), so the same
// version goes again, in full (t.mu held; s.full is set).
func (t *term) deltaMismatch(s *session, f *flight, n *discv1.Nack) {
	s.base = nil
	s.sentSeq = f.seq - 1
	t.s.metrics.deltaMismatches.Inc()
	t.log.Warn("proxy could not rebuild a snapshot from its delta; sending it in full",
		append(s.fields(), zap.String("version", f.version), zap.String("error", n.GetError()))...)
	s.notify()
}

// larger reports whether p's full encoding is larger than n bytes. It sizes the snapshot
// (proto.Size: a walk of every message, ~5–10 ms at 5,000 routes, which was most of a route
// change's time between the controller and a proxy, docs/controller.md session 15) only when a
// lower bound of that size does not already say so: the snapshot's encoding holds every
// listener's, server's and virtual host's name and every cluster's and secret's, so their
// lengths added up are never more than its size. A one-route delta is a few hundred bytes
// against tens of kilobytes of names at that scale.
func (p *prepared) larger(n int) bool {
	return n < namesLength(p.snap) || n < p.size()
}

// namesLength is the total length of the names a snapshot's encoding holds: a lower bound of
// its size that costs a few nanoseconds per virtual host.
func namesLength(snap *irv1.Snapshot) int {
	n := 0
	for _, l := range snap.GetListeners() {
		n += len(l.GetName())
		for _, s := range l.GetServers() {
			n += len(s.GetHostname())
			for _, vh := range s.GetVirtualHosts() {
				n += len(vh.GetHostname())
			}
		}
	}
	for _, c := range snap.GetClusters() {
		n += len(c.GetName())
	}
	for _, s := range snap.GetSecrets() {
		n += len(s.GetName())
	}
	return n
}
