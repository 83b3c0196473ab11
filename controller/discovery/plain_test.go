package discovery

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// The hand-over's module IDs and the tailoring as they were before session 16, walking and
// cloning the whole snapshot: the definitions the kept facts (facts.go) and the copy-on-write
// tailoring (tailoring.tailor) are held to by TestReuseEqualsPlain.

// plainModulesOf lists the module IDs a snapshot names: what a proxy must have compiled in to load it.
func plainModulesOf(snap *irv1.Snapshot) map[string]bool {
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

// plainTailor cuts snap down to what one proxy gets: a dedicated proxy only its Gateway's listeners
// (and only the clusters and Secrets those use: another Gateway's private keys never reach it),
// and a proxy lacking modules a snapshot that names none of them. A listener whose module is
// missing is left out, as is a route whose match module is missing; a route needing a missing
// filter answers 500 with the reason instead (the spec forbids skipping a filter). The result is
// resealed, so its version is its own. snap is not modified.
func plainTailor(snap *irv1.Snapshot, gw *gwKey, missing []string) (*irv1.Snapshot, error) {
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
				vh.Routes = plainTailorRoutes(vh.GetRoutes(), lacks)
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
	plainPrune(out, lacks)
	if err := irv1.Seal(out); err != nil {
		return nil, fmt.Errorf("sealing a tailored snapshot: %w", err)
	}
	return out, nil
}

func plainTailorRoutes(routes []*irv1.Route, lacks map[string]bool) []*irv1.Route {
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

// plainPrune drops the clusters and Secrets no remaining listener uses, and resets balancers whose
// module is missing to the default.
func plainPrune(snap *irv1.Snapshot, lacks map[string]bool) {
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

func plainModuleGaps(snap *irv1.Snapshot, gw *gwKey, missing []string) []routeGap {
	if len(missing) == 0 {
		return nil
	}
	lacks := map[string]bool{}
	for _, id := range missing {
		lacks[id] = true
	}
	var out []routeGap
	for _, l := range snap.GetListeners() {
		if lacks[listenerModule(l)] {
			continue
		}
		for _, sv := range l.GetServers() {
			if gw != nil && !gw.owns(sv) {
				continue
			}
			for _, vh := range sv.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					if id := r.GetMatch().GetId(); lacks[id] {
						out = append(out, routeGap{route: r.GetName(), sources: sv.GetSources(), module: id, dropped: true})
					} else if id := missingFilter(r, lacks); id != "" {
						out = append(out, routeGap{route: r.GetName(), sources: sv.GetSources(), module: id})
					}
				}
			}
		}
	}
	return out
}
