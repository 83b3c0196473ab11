package translator

import (
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// vhostMemo remembers, for an Incremental, the virtual hosts of the previous snapshot with what
// they were made of, so that a virtual host whose entries are the very same (the same replayed
// build records, hence the same route objects in the same world) is not sorted and built again:
// its IR message is shared with the previous snapshot, which also lets the sealer reuse its
// encoding. A nil *vhostMemo (Translate) remembers nothing.
type vhostMemo struct {
	prev, next map[vhostKey]*vhostRecord
}

// vhostKey names a virtual host: its IR listener, server and hostname.
type vhostKey struct{ listener, server, vhost string }

type vhostRecord struct {
	// entries and origins are the placed entries in the order they were placed; precedence
	// sorting depends on nothing else (an entry stands for its route object).
	entries []placedEntry
	vh      *irv1.VirtualHost
	// shadows are the ExclusiveKind routes another one shadowed, by index into entries.
	shadows []vhostShadow
}

type placedEntry struct {
	entry  *translation.Entry
	origin string
}

type vhostShadow struct {
	placed int
	msg    string
}

// reuse returns the remembered virtual host for ps, replaying its shadowing onto ps's parents,
// or nil when ps is not what it was made of.
func (m *vhostMemo) reuse(key vhostKey, ps []*placed) *irv1.VirtualHost {
	if m == nil {
		return nil
	}
	r := m.prev[key]
	if r == nil || len(r.entries) != len(ps) {
		return nil
	}
	for i, p := range ps {
		if r.entries[i].entry != p.entry || r.entries[i].origin != p.origin {
			return nil
		}
	}
	for _, s := range r.shadows {
		ps[s.placed].parent.shadow(s.msg)
	}
	m.next[key] = r
	return r.vh
}

func (m *vhostMemo) record(key vhostKey, in []*placed, vh *irv1.VirtualHost, shadows []vhostShadow) {
	if m == nil {
		return
	}
	r := &vhostRecord{entries: make([]placedEntry, len(in)), vh: vh, shadows: shadows}
	for i, p := range in {
		r.entries[i] = placedEntry{entry: p.entry, origin: p.origin}
	}
	m.next[key] = r
}

// start begins a translation: what the previous one recorded is what this one may reuse.
func (m *vhostMemo) start() {
	m.prev, m.next = m.next, make(map[vhostKey]*vhostRecord, len(m.next))
}
