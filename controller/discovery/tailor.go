package discovery

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// gwKey names a Gateway.
type gwKey struct{ namespace, name string }

func (k gwKey) String() string { return k.namespace + "/" + k.name }

// sourcePrefix is how Server.sources name the listeners of Gateway k.
func (k gwKey) sourcePrefix() string { return k.namespace + "/" + k.name + "/" }

func (k gwKey) owns(sv *irv1.Server) bool {
	p := k.sourcePrefix()
	for _, src := range sv.GetSources() {
		if strings.HasPrefix(src, p) {
			return true
		}
	}
	return false
}

// listenerModule is the module a proxy loads for a snapshot listener (as core/proxy does).
func listenerModule(l *irv1.Listener) string { return "listener." + strings.ToLower(l.GetProtocol()) }

// http3Module is the module a proxy loads for the UDP socket of an HTTPS listener with http3
// (core/proxy.HTTP3ModuleID; the controller does not import the engine).
const http3Module = "listener.http3"

// missingModules is what of need the proxy's modules lack, sorted.
func missingModules(need map[string]bool, have map[string]bool) []string {
	var out []string
	for id := range need {
		if !have[id] {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// tailor cuts snap down to what one proxy gets: a dedicated proxy only its Gateway's listeners
// (and only the clusters and Secrets those use: another Gateway's private keys never reach it),
// and a proxy lacking modules a snapshot that names none of them. A listener whose module is
// missing is left out, as is a route whose match module is missing; a route needing a missing
// filter answers 500 with the reason instead (the spec forbids skipping a filter). The result is
// resealed, so its version is its own. snap is not modified. This is a tailoring of its own,
// remembering nothing: a term keeps one per kind of proxy (tailoring.tailor).
func tailor(snap *irv1.Snapshot, gw *gwKey, missing []string) (*irv1.Snapshot, error) {
	return (&tailoring{}).tailor(snap, factsOf(snap), gw, missing)
}

// tailoring is the cut of the snapshots for one kind of proxy (a tailoring key: its Gateway and
// the modules it lacks), kept across publications. The tailored snapshot shares every message
// the cut does not change with the published one (copy on write: a listener that loses servers,
// a virtual host with a route needing a missing module, a cluster with a missing balancer are
// new messages), and the copies made for the previous snapshot are reused for the messages it
// shared with this one, so a route change costs the virtual hosts it touched here too, and the
// Sealer reseals only those. Before session 16 every publication cloned the whole snapshot per
// tailoring key (~27 ms at 5,000 routes on a quiet machine, ~60 ms at load 13) and hashed it
// whole.
type tailoring struct {
	mu     sync.Mutex // one build at a time: the sealer and the copies
	sealer irv1.Sealer
	// The copies made for the previous snapshot, by the published message they replace.
	vhosts   map[*irv1.VirtualHost]*irv1.VirtualHost
	clusters map[*irv1.Cluster]*irv1.Cluster
}

// cut is one tailoring's pass over a snapshot.
type cut struct {
	t        *tailoring
	lacks    map[string]bool
	vhosts   map[*irv1.VirtualHost]*irv1.VirtualHost // the copies made or reused for this snapshot
	clusters map[string]bool                         // what the remaining routes use
	secrets  map[string]bool
}

func (t *tailoring) tailor(snap *irv1.Snapshot, facts *snapshotFacts, gw *gwKey, missing []string) (*irv1.Snapshot, error) {
	if gw == nil && len(missing) == 0 {
		return snap, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &cut{t: t, lacks: map[string]bool{}, vhosts: map[*irv1.VirtualHost]*irv1.VirtualHost{},
		clusters: map[string]bool{}, secrets: map[string]bool{}}
	for _, id := range missing {
		c.lacks[id] = true
	}
	out := irv1.Shallow(snap)
	out.Listeners = nil
	for _, l := range snap.GetListeners() {
		if tl := c.listener(l, facts, gw); tl != nil {
			out.Listeners = append(out.Listeners, tl)
		}
	}
	out.Clusters = c.keptClusters(snap.GetClusters())
	out.Secrets = nil
	for _, s := range snap.GetSecrets() {
		if c.secrets[s.GetName()] {
			out.Secrets = append(out.Secrets, s)
		}
	}
	if gw != nil {
		out.Gateways = nil
		parents := listenerSetParents(snap)
		for _, g := range snap.GetGateways() {
			k := gwKey{g.GetNamespace(), g.GetName()}
			if p, ok := parents[k]; k == *gw || ok && p == *gw {
				out.Gateways = append(out.Gateways, g)
			}
		}
	}
	t.vhosts = c.vhosts
	if err := t.sealer.Seal(out); err != nil {
		t.sealer.Forget()
		return nil, fmt.Errorf("sealing a tailored snapshot: %w", err)
	}
	return out, nil
}

// listener is l as the proxy gets it: nil when none of its servers remain.
func (c *cut) listener(l *irv1.Listener, facts *snapshotFacts, gw *gwKey) *irv1.Listener {
	if c.lacks[listenerModule(l)] {
		return nil
	}
	changed := c.lacks[http3Module] && l.GetHttp3() != nil // HTTPS without HTTP/3 rather than no listener
	var servers []*irv1.Server
	for _, sv := range l.GetServers() {
		if gw != nil && !gw.owns(sv) {
			changed = true
			continue
		}
		tsv := c.server(sv, facts.vhosts[sv])
		changed = changed || tsv != sv
		servers = append(servers, tsv)
	}
	if len(servers) == 0 {
		return nil
	}
	if !changed {
		return l
	}
	out := irv1.Shallow(l)
	out.Servers = servers
	if c.lacks[http3Module] {
		out.Http3 = nil
	}
	return out
}

// server is sv with its virtual hosts that name a missing module replaced, and notes the
// clusters and Secrets it uses.
func (c *cut) server(sv *irv1.Server, facts []*vhostFacts) *irv1.Server {
	for _, name := range sv.GetTls().GetCertificates() {
		c.secrets[name] = true
	}
	var vhosts []*irv1.VirtualHost // nil while every virtual host is sv's own
	for i, vh := range sv.GetVirtualHosts() {
		f := facts[i]
		tvh := vh
		if len(c.lacks) > 0 && f.names(c.lacks) {
			tvh = c.vhost(vh)
			for _, r := range tvh.GetRoutes() {
				for _, be := range r.GetBackends() {
					c.clusters[be.GetCluster()] = true
				}
			}
		} else {
			for _, name := range f.clusters {
				c.clusters[name] = true
			}
		}
		if tvh != vh && vhosts == nil {
			vhosts = make([]*irv1.VirtualHost, i, len(sv.GetVirtualHosts()))
			copy(vhosts, sv.GetVirtualHosts()[:i])
		}
		if vhosts != nil {
			vhosts = append(vhosts, tvh)
		}
	}
	if vhosts == nil {
		return sv
	}
	out := irv1.Shallow(sv)
	out.VirtualHosts = vhosts
	return out
}

// vhost is vh without the routes whose match module is missing and with those needing a
// missing filter answering 500: the copy made for the previous snapshot when vh was in it.
func (c *cut) vhost(vh *irv1.VirtualHost) *irv1.VirtualHost {
	out := c.t.vhosts[vh]
	if out == nil {
		out = irv1.Shallow(vh)
		out.Routes = nil
		for _, r := range vh.GetRoutes() {
			if c.lacks[r.GetMatch().GetId()] {
				continue
			}
			if id := missingFilter(r, c.lacks); id != "" {
				r = irv1.Shallow(r)
				r.Filters = nil
				r.Backends = []*irv1.Backend{{Weight: 1,
					Error: fmt.Sprintf("module %s is not compiled into this proxy", id)}}
			}
			out.Routes = append(out.Routes, r)
		}
	}
	c.vhosts[vh] = out
	return out
}

// keptClusters are the clusters the remaining routes use, a missing balancer reset to the
// default.
func (c *cut) keptClusters(all []*irv1.Cluster) []*irv1.Cluster {
	var out []*irv1.Cluster
	copies := map[*irv1.Cluster]*irv1.Cluster{}
	for _, cl := range all {
		if !c.clusters[cl.GetName()] {
			continue
		}
		if c.lacks[cl.GetBalancer().GetId()] {
			cp := c.t.clusters[cl]
			if cp == nil {
				cp = irv1.Shallow(cl)
				cp.Balancer = nil
			}
			copies[cl] = cp
			cl = cp
		}
		out = append(out, cl)
	}
	c.t.clusters = copies
	return out
}

// gatewayListeners maps every Gateway of snap to the names of the snapshot listeners serving it.
func gatewayListeners(snap *irv1.Snapshot) map[gwKey][]string {
	out := map[gwKey][]string{}
	for _, g := range snap.GetGateways() {
		out[gwKey{g.GetNamespace(), g.GetName()}] = nil
	}
	for _, l := range snap.GetListeners() {
		seen := map[gwKey]bool{}
		for _, sv := range l.GetServers() {
			for _, src := range sv.GetSources() {
				parts := strings.SplitN(src, "/", 3)
				if len(parts) < 2 {
					continue
				}
				k := gwKey{parts[0], parts[1]}
				if _, ok := out[k]; ok && !seen[k] {
					seen[k] = true
					out[k] = append(out[k], l.GetName())
				}
			}
		}
	}
	return out
}

// missingFilter is the first filter of r whose module lacks has: the reason r answers 500.
func missingFilter(r *irv1.Route, lacks map[string]bool) string {
	for _, f := range r.GetFilters() {
		if lacks[f.GetId()] {
			return f.GetId()
		}
	}
	for _, be := range r.GetBackends() {
		for _, f := range be.GetFilters() {
			if lacks[f.GetId()] {
				return f.GetId()
			}
		}
	}
	return ""
}
