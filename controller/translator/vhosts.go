package translator

import (
	"slices"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// vhostMemo remembers, for an Incremental, the servers of the previous snapshot: each virtual
// host with what it was made of, and the order of the server's virtual hosts. A virtual host
// whose entries are the very same (the same replayed build records, hence the same route objects
// in the same world) is not sorted and built again: its IR message is shared with the previous
// snapshot, which also lets the sealer reuse its hash. And the server's virtual hosts are
// not sorted again either: the previous order is kept, the virtual hosts that went are left out
// and the new ones merged in (hostnameLess is a total order on distinct hostnames, so this is
// the order sorting would give). Precedence sorting thus runs only within the virtual hosts a
// change touched. A nil *vhostMemo (Translate) remembers nothing.
//
// Nor are the unchanged virtual hosts looked at, in the common case: when every route of a
// server was settled (routeMemo.settled: placed from its records, on the same listeners with the
// same hostnames and entries as before) but for a few, only the hostnames of those few — where
// they are now and where they were — can hold other entries than before (dirtyHosts). The
// server's record is then updated in place: only those hostnames are gathered, compared and
// rebuilt, and the others stay as they are, with no pass over their entries. That holds while
// each virtual host is the sum of its routes' own records: a server one of whose listeners had
// an attachment taken off or changed by a pass over several routes (listenerState.crossRoute:
// HTTPRoute/GRPCRoute conflicts, implicit routes yielding), in this translation or the previous
// one, is gathered whole.
type vhostMemo struct {
	prev, next map[serverKey]*serverRecord
	// epoch counts translations (vhostRecord.succ).
	epoch uint64
	// touched are the routes this translation shadowed (statuschanges.go), some twice.
	touched []*routeState
}

// touch notes that st's parent statuses were written into by another route's pass.
func (m *vhostMemo) touch(st *routeState) {
	if m != nil {
		m.touched = append(m.touched, st)
	}
}

// serverKey names a server: its IR listener and hostname.
type serverKey struct{ listener, server string }

type serverRecord struct {
	vhosts map[string]*vhostRecord
	// order are the virtual hosts in the server's order, vhs their messages (the server's
	// VirtualHosts, of which each snapshot gets a copy).
	order []*vhostRecord
	vhs   []*irv1.VirtualHost
	// clusters counts the virtual hosts of order naming each cluster; shadowing those with
	// shadows. Both are kept up to date when the record is updated in place, so that neither
	// the clusters nor the shadows take a visit of every virtual host (finishInPlace).
	clusters  map[string]int
	shadowing int
	// crossRoute: a listener of the server was crossRoute when the record was made.
	crossRoute bool
}

type vhostRecord struct {
	// entries and origins are the placed entries in the order they were placed; precedence
	// sorting depends on nothing else (an entry stands for its route object).
	entries []placedEntry
	vh      *irv1.VirtualHost
	// shadows are the ExclusiveKind routes another one shadowed, by index into entries.
	shadows []vhostShadow
	// clusters are the clusters the virtual host's routes name, each once.
	clusters []string
	// succ is what stands in this record's place in the translation of epoch succEpoch: itself
	// when reused, the rebuilt virtual host of the same hostname otherwise.
	succ      *vhostRecord
	succEpoch uint64
}

type placedEntry struct {
	entry  *translation.Entry
	origin string
	// memo is the record of the entry's route (nil in Translate).
	memo *routeMemo
}

// vhostShadow is an entry (by index) whose route another one shadowed, by which of the route's
// parentRefs it was placed.
type vhostShadow struct {
	placed, parent int
	msg            string
}

// serverBuilder assembles the virtual hosts of one server for one translation.
type serverBuilder struct {
	m     *vhostMemo
	prev  *serverRecord
	next  *serverRecord
	added []*vhostRecord // hostnames the previous translation did not have
	// dirty are the hostnames to gather when the record is updated in place (next == prev);
	// nil when every hostname is.
	dirty map[string]bool
}

// server starts the virtual hosts of one server, whose listeners are ls; epoch is the route
// records' (memoIndex.epoch); dirty, when not nil, are what dirtyHosts would find, or more
// (changes.go).
func (m *vhostMemo) server(key serverKey, ls []*listenerState, epoch uint64, dirty map[string]bool) *serverBuilder {
	b := &serverBuilder{m: m}
	if m == nil {
		return b
	}
	b.prev = m.prev[key]
	cross := false
	for _, l := range ls {
		cross = cross || l.crossRoute
	}
	if b.prev != nil && !b.prev.crossRoute && !cross {
		b.next, b.dirty = b.prev, dirty
		if dirty == nil {
			b.dirty = b.dirtyHosts(ls, epoch)
		}
	} else {
		n := 0
		if b.prev != nil {
			n = len(b.prev.vhosts)
		}
		b.next = &serverRecord{vhosts: make(map[string]*vhostRecord, n)}
	}
	b.next.crossRoute = cross
	m.next[key] = b.next
	return b
}

// dirtyHosts are the hostnames of the server whose entries may differ from the previous
// translation's: those the routes that are not settled are placed on now, and those of the
// previous virtual hosts with an entry of a route that is not settled (changed, gone, or in the
// Store twice now or then). Every other virtual host is made of settled routes' entries only,
// the same entries in the same order as before.
func (b *serverBuilder) dirtyHosts(ls []*listenerState, epoch uint64) map[string]bool {
	dirty := map[string]bool{}
	for _, l := range ls {
		for _, a := range l.routes {
			if !a.route.memo.settled(epoch) {
				for _, h := range a.hostnames {
					dirty[h] = true
				}
			}
		}
	}
	for _, r := range b.prev.order {
		for i := range r.entries {
			if rm := r.entries[i].memo; !rm.settled(epoch) || rm.dupEpoch+1 == epoch {
				dirty[r.vh.Hostname] = true
				break
			}
		}
	}
	return dirty
}

// gathers says whether the server's virtual host of hostname h is to be gathered from its
// listeners' attachments (and then compared with or built afresh).
func (b *serverBuilder) gathers(h string) bool { return b.dirty == nil || b.dirty[h] }

// keepClean keeps the virtual hosts not gathered, when the record is updated in place: the
// same records, whose shadowing it replays onto the routes' parent statuses of this
// translation; and drops the gathered hostnames that no entry holds any more.
func (b *serverBuilder) keepClean(gathered map[string][]placed) {
	if b.dirty == nil {
		return
	}
	for h := range b.dirty {
		if len(gathered[h]) == 0 {
			delete(b.next.vhosts, h) // its record is no one's successor: finish leaves it out
		}
	}
	if b.prev.shadowing == 0 {
		return // no shadows to replay; finishInPlace needs no successors
	}
	for _, r := range b.prev.order {
		if b.dirty[r.vh.Hostname] {
			continue
		}
		for _, s := range r.shadows {
			st := r.entries[s.placed].memo.cur
			st.parents[s.parent].shadow(s.msg)
			b.m.touch(st)
		}
		r.succ, r.succEpoch = r, b.m.epoch
	}
}

// reuse returns the remembered virtual host of hostname h, replaying its shadowing onto ps's
// parents, or nil when ps is not what it was made of.
func (b *serverBuilder) reuse(h string, ps []placed) *irv1.VirtualHost {
	if b.prev == nil {
		return nil
	}
	r := b.prev.vhosts[h]
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
		b.m.touch(ps[s.placed].route)
	}
	r.succ, r.succEpoch = r, b.m.epoch
	b.next.vhosts[h] = r
	return r.vh
}

// record remembers a virtual host built afresh.
func (b *serverBuilder) record(h string, in []placed, vh *irv1.VirtualHost, shadows []vhostShadow) {
	if b.m == nil {
		return
	}
	r := &vhostRecord{entries: make([]placedEntry, len(in)), vh: vh, shadows: shadows, clusters: clustersOf(vh)}
	for i, p := range in {
		r.entries[i] = placedEntry{entry: p.entry, origin: p.origin, memo: p.route.memo}
	}
	old := b.prevRecord(h) // before the next record takes its place: they may be one map
	b.next.vhosts[h] = r
	if old != nil {
		old.succ, old.succEpoch = r, b.m.epoch
	} else {
		b.added = append(b.added, r)
	}
}

func (b *serverBuilder) prevRecord(h string) *vhostRecord {
	if b.prev == nil {
		return nil
	}
	return b.prev.vhosts[h]
}

// finish returns the server's virtual hosts in order, and calls used with the clusters they
// name. Without a memo it sorts vhs; with one it keeps the previous order (see vhostMemo).
func (b *serverBuilder) finish(vhs []*irv1.VirtualHost, used func(cluster string)) []*irv1.VirtualHost {
	if b.m == nil {
		slices.SortFunc(vhs, compareVirtualHosts)
		for _, vh := range vhs {
			for _, c := range clustersOf(vh) {
				used(c)
			}
		}
		return vhs
	}
	if b.dirty != nil {
		return b.finishInPlace(used)
	}
	slices.SortFunc(b.added, func(x, y *vhostRecord) int { return compareVirtualHosts(x.vh, y.vh) })
	order := make([]*vhostRecord, 0, len(b.next.vhosts))
	var kept []*vhostRecord
	if b.prev != nil {
		kept = make([]*vhostRecord, 0, len(b.prev.order))
		for _, r := range b.prev.order {
			if r.succEpoch == b.m.epoch {
				kept = append(kept, r.succ)
			}
		}
	}
	// Merge the kept order with the added virtual hosts, both sorted.
	i, j := 0, 0
	for i < len(kept) || j < len(b.added) {
		if j == len(b.added) || (i < len(kept) && hostnameLess(kept[i].vh.Hostname, b.added[j].vh.Hostname)) {
			order = append(order, kept[i])
			i++
		} else {
			order = append(order, b.added[j])
			j++
		}
	}
	rec := b.next
	rec.order, rec.vhs, rec.clusters, rec.shadowing = order, make([]*irv1.VirtualHost, len(order)), map[string]int{}, 0
	for i, r := range order {
		rec.vhs[i] = r.vh
		rec.count(r, 1)
	}
	for c := range rec.clusters {
		used(c)
	}
	return slices.Clone(rec.vhs)
}

// finishInPlace is finish for a record updated in place: only the dirty hostnames can have
// moved in or out of the order or changed their record, so each is found by bisection and
// patched, and the snapshot gets a copy of the patched messages; the other virtual hosts are
// not visited (at thousands of virtual hosts, rebuilding the order, the messages and the
// cluster names from every record was a tenth of a route change's translation).
func (b *serverBuilder) finishInPlace(used func(cluster string)) []*irv1.VirtualHost {
	rec := b.next
	for h := range b.dirty {
		i, found := slices.BinarySearchFunc(rec.order, h, func(r *vhostRecord, h string) int { return compareHostnames(r.vh.Hostname, h) })
		cur := rec.vhosts[h]
		switch {
		case found && cur == nil: // no entry holds it any more
			rec.count(rec.order[i], -1)
			rec.order, rec.vhs = slices.Delete(rec.order, i, i+1), slices.Delete(rec.vhs, i, i+1)
		case found && cur != rec.order[i]: // rebuilt
			rec.count(rec.order[i], -1)
			rec.count(cur, 1)
			rec.order[i], rec.vhs[i] = cur, cur.vh
		case !found && cur != nil: // new
			rec.count(cur, 1)
			rec.order, rec.vhs = slices.Insert(rec.order, i, cur), slices.Insert(rec.vhs, i, cur.vh)
		}
	}
	for c := range rec.clusters {
		used(c)
	}
	return slices.Clone(rec.vhs)
}

// count adds (by 1 or -1) r's clusters and shadows to the server's.
func (rec *serverRecord) count(r *vhostRecord, by int) {
	for _, c := range r.clusters {
		if rec.clusters[c] += by; rec.clusters[c] == 0 {
			delete(rec.clusters, c)
		}
	}
	if len(r.shadows) > 0 {
		rec.shadowing += by
	}
}

func compareHostnames(a, b string) int {
	switch {
	case hostnameLess(a, b):
		return -1
	case hostnameLess(b, a):
		return 1
	}
	return 0
}

func compareVirtualHosts(a, b *irv1.VirtualHost) int {
	switch {
	case hostnameLess(a.Hostname, b.Hostname):
		return -1
	case hostnameLess(b.Hostname, a.Hostname):
		return 1
	}
	return 0
}

// clustersOf lists the clusters vh's routes name, each once.
func clustersOf(vh *irv1.VirtualHost) []string {
	var out []string
	for _, r := range vh.Routes {
		for _, be := range r.Backends {
			if be.Cluster != "" && !slices.Contains(out, be.Cluster) {
				out = append(out, be.Cluster)
			}
		}
	}
	return out
}

// start begins a translation: what the previous one recorded is what this one may reuse.
func (m *vhostMemo) start() {
	m.epoch++
	m.prev, m.next = m.next, make(map[serverKey]*serverRecord, len(m.next))
	m.touched = nil
}
