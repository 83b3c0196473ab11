package discovery

import (
	"slices"
	"strings"
	"sync"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// What the hand-over (Publish) and the tailoring need to know of a snapshot's virtual hosts —
// the module IDs their routes name, the clusters their backends use — kept across publications
// by message address. The translator shares every message a change did not touch with the
// previous snapshot (and a snapshot is immutable once sealed), so a route change costs the
// virtual hosts it replaced, a pointer comparison per virtual host of the changed server and a
// few map operations per server; before session 16 both walked every route per publication
// (modulesOf: ~0.6 ms of CPU at 5,000 routes, ~4 ms at 20,000).

// vhostFacts are what one virtual host's routes name. Made once per virtual host message and
// never changed: published snapshots' facts are read by the sessions' tailoring.
type vhostFacts struct {
	modules  []string // distinct module IDs: route kinds, route and backend filters
	clusters []string // distinct clusters of the routes' backends
}

func factsOfVhost(vh *irv1.VirtualHost) *vhostFacts {
	f := &vhostFacts{}
	add := func(mc *irv1.ModuleConfig) {
		if id := mc.GetId(); id != "" && !slices.Contains(f.modules, id) {
			f.modules = append(f.modules, id)
		}
	}
	for _, r := range vh.GetRoutes() {
		add(r.GetMatch())
		for _, mc := range r.GetFilters() {
			add(mc)
		}
		for _, be := range r.GetBackends() {
			for _, mc := range be.GetFilters() {
				add(mc)
			}
			if c := be.GetCluster(); c != "" && !slices.Contains(f.clusters, c) {
				f.clusters = append(f.clusters, c)
			}
		}
	}
	return f
}

// names says whether the virtual host names a module of lacks.
func (f *vhostFacts) names(lacks map[string]bool) bool {
	for _, id := range f.modules {
		if lacks[id] {
			return true
		}
	}
	return false
}

// tally is the facts of a list of messages (a server's virtual hosts, a snapshot's clusters)
// and how many of them name each ID.
type tally[M, F any] struct {
	items []*M
	facts []F // facts[i] are items[i]'s
	count map[string]int
}

// advance makes the tally of items from prev, the tally of the list items replaces: the facts
// of the messages items begins and ends with, the same as prev's, are taken over, and only the
// window between them is looked at (a moved message's facts are found by address there). prev
// is spent: its count moves over, its facts stay as they were (published facts are read
// concurrently). prev may be nil.
func advance[M, F any](prev *tally[M, F], items []*M, of func(*M) F, keys func(F, func(string))) *tally[M, F] {
	next := &tally[M, F]{items: items, facts: make([]F, len(items))}
	var old []*M
	var oldFacts []F
	if prev != nil {
		old, oldFacts, next.count = prev.items, prev.facts, prev.count
		prev.count = nil
	}
	if next.count == nil {
		next.count = map[string]int{}
	}
	head := 0
	for head < len(old) && head < len(items) && old[head] == items[head] {
		head++
	}
	tail := 0
	for tail < len(old)-head && tail < len(items)-head && old[len(old)-1-tail] == items[len(items)-1-tail] {
		tail++
	}
	copy(next.facts, oldFacts[:head])
	copy(next.facts[len(items)-tail:], oldFacts[len(old)-tail:])
	moved := map[*M]F{}
	for i := head; i < len(old)-tail; i++ {
		moved[old[i]] = oldFacts[i]
		keys(oldFacts[i], func(id string) {
			if next.count[id]--; next.count[id] <= 0 {
				delete(next.count, id)
			}
		})
	}
	for i := head; i < len(items)-tail; i++ {
		f, ok := moved[items[i]]
		if !ok {
			f = of(items[i])
		}
		next.facts[i] = f
		keys(f, func(id string) { next.count[id]++ })
	}
	return next
}

func vhostModules(f *vhostFacts, each func(string)) {
	for _, id := range f.modules {
		each(id)
	}
}

func clusterBalancer(c *irv1.Cluster) string { return c.GetBalancer().GetId() }

func balancerKey(id string, each func(string)) {
	if id != "" {
		each(id)
	}
}

type vhostTally = tally[irv1.VirtualHost, *vhostFacts]

// catalog keeps the tallies of the latest published snapshot, to advance them to the next.
type catalog struct {
	mu       sync.Mutex
	servers  map[*irv1.Server]*vhostTally
	byPlace  map[string]*irv1.Server // the servers by place (serverPlace): a changed server's predecessor
	clusters *tally[irv1.Cluster, string]
}

// snapshotFacts are what a published snapshot names. Read-only once made.
type snapshotFacts struct {
	modules map[string]bool                // every module ID: what a proxy must have to load it whole
	vhosts  map[*irv1.Server][]*vhostFacts // each server's virtual hosts' facts, in order
}

// serverPlace names where a server sits, to find the server a changed one replaces: its
// listener, hostname and Gateway listeners.
func serverPlace(l *irv1.Listener, sv *irv1.Server) string {
	return l.GetName() + "\x00" + sv.GetHostname() + "\x00" + strings.Join(sv.GetSources(), "\x00")
}

// update advances the catalog to snap and returns what snap names.
func (c *catalog) update(snap *irv1.Snapshot) *snapshotFacts {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[*irv1.Server]*vhostTally{}
	for _, l := range snap.GetListeners() {
		for _, sv := range l.GetServers() {
			if t := c.servers[sv]; t != nil {
				next[sv] = t // unchanged: taken over whole
			}
		}
	}
	places := map[string]*irv1.Server{}
	for _, l := range snap.GetListeners() {
		for _, sv := range l.GetServers() {
			place := serverPlace(l, sv)
			places[place] = sv
			if next[sv] != nil {
				continue
			}
			var prev *vhostTally
			if ps := c.byPlace[place]; ps != nil && next[ps] == nil {
				prev = c.servers[ps]
				delete(c.servers, ps) // spent: another server of the same place starts afresh
			}
			next[sv] = advance(prev, sv.GetVirtualHosts(), factsOfVhost, vhostModules)
		}
	}
	c.servers, c.byPlace = next, places
	c.clusters = advance(c.clusters, snap.GetClusters(), clusterBalancer, balancerKey)

	f := &snapshotFacts{modules: map[string]bool{}, vhosts: make(map[*irv1.Server][]*vhostFacts, len(next))}
	for _, l := range snap.GetListeners() {
		f.modules[listenerModule(l)] = true
		if l.GetHttp3() != nil {
			f.modules[http3Module] = true
		}
	}
	for sv, t := range next {
		f.vhosts[sv] = t.facts
		for id := range t.count {
			f.modules[id] = true
		}
	}
	for id := range c.clusters.count {
		f.modules[id] = true
	}
	return f
}

// factsOf is what snap names, computed afresh (tests, and tailor without a term).
func factsOf(snap *irv1.Snapshot) *snapshotFacts {
	var c catalog
	return c.update(snap)
}
