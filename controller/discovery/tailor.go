package discovery

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

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

// modulesOf lists the module IDs a snapshot names: what a proxy must have compiled in to load it.
func modulesOf(snap *irv1.Snapshot) map[string]bool {
	ids := map[string]bool{}
	add := func(mc *irv1.ModuleConfig) {
		if mc.GetId() != "" {
			ids[mc.GetId()] = true
		}
	}
	for _, l := range snap.GetListeners() {
		ids[listenerModule(l)] = true
		if l.GetHttp3() != nil {
			ids[http3Module] = true
		}
		for _, sv := range l.GetServers() {
			for _, vh := range sv.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					add(r.GetMatch())
					for _, f := range r.GetFilters() {
						add(f)
					}
					for _, be := range r.GetBackends() {
						for _, f := range be.GetFilters() {
							add(f)
						}
					}
				}
			}
		}
	}
	for _, c := range snap.GetClusters() {
		add(c.GetBalancer())
	}
	return ids
}

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
// resealed, so its version is its own. snap is not modified.
func tailor(snap *irv1.Snapshot, gw *gwKey, missing []string) (*irv1.Snapshot, error) {
	if gw == nil && len(missing) == 0 {
		return snap, nil
	}
	lacks := map[string]bool{}
	for _, id := range missing {
		lacks[id] = true
	}
	out := proto.Clone(snap).(*irv1.Snapshot)
	var listeners []*irv1.Listener
	for _, l := range out.GetListeners() {
		if lacks[listenerModule(l)] {
			continue
		}
		if lacks[http3Module] {
			l.Http3 = nil // HTTPS without HTTP/3 rather than no listener
		}
		var servers []*irv1.Server
		for _, sv := range l.GetServers() {
			if gw != nil && !gw.owns(sv) {
				continue
			}
			for _, vh := range sv.GetVirtualHosts() {
				vh.Routes = tailorRoutes(vh.GetRoutes(), lacks)
			}
			servers = append(servers, sv)
		}
		if len(servers) > 0 {
			l.Servers = servers
			listeners = append(listeners, l)
		}
	}
	out.Listeners = listeners
	if gw != nil {
		var gws []*irv1.GatewayGeneration
		parents := listenerSetParents(snap)
		for _, g := range out.GetGateways() {
			k := gwKey{g.GetNamespace(), g.GetName()}
			if p, ok := parents[k]; k == *gw || ok && p == *gw {
				gws = append(gws, g)
			}
		}
		out.Gateways = gws
	}
	prune(out, lacks)
	if err := irv1.Seal(out); err != nil {
		return nil, fmt.Errorf("sealing a tailored snapshot: %w", err)
	}
	return out, nil
}

func tailorRoutes(routes []*irv1.Route, lacks map[string]bool) []*irv1.Route {
	if len(lacks) == 0 {
		return routes
	}
	out := routes[:0]
	for _, r := range routes {
		if lacks[r.GetMatch().GetId()] {
			continue
		}
		if id := missingFilter(r, lacks); id != "" {
			r.Filters = nil
			r.Backends = []*irv1.Backend{{Weight: 1,
				Error: fmt.Sprintf("module %s is not compiled into this proxy", id)}}
		}
		out = append(out, r)
	}
	return out
}

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

// prune drops the clusters and Secrets no remaining listener uses, and resets balancers whose
// module is missing to the default.
func prune(snap *irv1.Snapshot, lacks map[string]bool) {
	clusters, secrets := map[string]bool{}, map[string]bool{}
	for _, l := range snap.GetListeners() {
		for _, sv := range l.GetServers() {
			for _, c := range sv.GetTls().GetCertificates() {
				secrets[c] = true
			}
			for _, vh := range sv.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					for _, be := range r.GetBackends() {
						clusters[be.GetCluster()] = true
					}
				}
			}
		}
	}
	var cs []*irv1.Cluster
	for _, c := range snap.GetClusters() {
		if !clusters[c.GetName()] {
			continue
		}
		if lacks[c.GetBalancer().GetId()] {
			c.Balancer = nil
		}
		cs = append(cs, c)
	}
	snap.Clusters = cs
	var ss []*irv1.Secret
	for _, s := range snap.GetSecrets() {
		if secrets[s.GetName()] {
			ss = append(ss, s)
		}
	}
	snap.Secrets = ss
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
