package discovery

import (
	"sort"
	"strconv"
	"strings"

	"github.com/coxswain-labs/coxswain/controller"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// routeGap is a route of a snapshot that one kind of proxy (a tailoring) cannot serve as written
// because its binary lacks a module: tailor leaves it out (its match module is missing) or makes
// it answer 500 (a filter is missing).
type routeGap struct {
	route   string   // the IR route name, "<kind>/<namespace>/<name>/rule/<i>/match/<j>"
	sources []string // the Gateway listeners of its server, "<namespace>/<gateway>/<section>"
	module  string
	dropped bool
}

// moduleGaps lists the routes tailor(snap, gw, missing) leaves out or turns into a 500, among
// those the proxy gets at all (its Gateway's, on listeners whose module it has).
func moduleGaps(snap *irv1.Snapshot, facts *snapshotFacts, gw *gwKey, missing []string) []routeGap {
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
			vfacts := facts.vhosts[sv]
			for i, vh := range sv.GetVirtualHosts() {
				if !vfacts[i].names(lacks) {
					continue // what a virtual host names is known: most name no missing module
				}
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

// routeModuleGaps turns the gaps of every connected proxy into what the status writer needs:
// one entry per route rule, Gateway listener and proxy, sorted (t.mu held).
func (t *term) routeModuleGaps() []controller.RouteModuleGap {
	seen := map[controller.RouteModuleGap]bool{}
	var out []controller.RouteModuleGap
	for _, s := range t.sessions {
		if s.last == nil {
			continue
		}
		for _, g := range s.last.gaps {
			kind, ns, name, rule, ok := parseRouteName(g.route)
			if !ok {
				continue
			}
			for _, src := range g.sources {
				parts := strings.SplitN(src, "/", 3)
				if len(parts) < 3 {
					continue
				}
				e := controller.RouteModuleGap{Kind: kind, Namespace: ns, Name: name, Rule: rule,
					GatewayNamespace: parts[0], GatewayName: parts[1], Section: parts[2],
					Proxy: s.node, Module: g.module, Dropped: g.dropped}
				if !seen[e] {
					seen[e] = true
					out = append(out, e)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return gapLess(out[i], out[j]) })
	return out
}

func gapLess(a, b controller.RouteModuleGap) bool {
	for _, c := range [][2]string{{a.Kind, b.Kind}, {a.Namespace, b.Namespace}, {a.Name, b.Name}} {
		if c[0] != c[1] {
			return c[0] < c[1]
		}
	}
	if a.Rule != b.Rule {
		return a.Rule < b.Rule
	}
	for _, c := range [][2]string{{a.GatewayNamespace, b.GatewayNamespace}, {a.GatewayName, b.GatewayName}, {a.Section, b.Section}, {a.Proxy, b.Proxy}, {a.Module, b.Module}} {
		if c[0] != c[1] {
			return c[0] < c[1]
		}
	}
	return !a.Dropped && b.Dropped
}

// parseRouteName splits "<kind>/<namespace>/<name>/rule/<i>/match/<j>".
func parseRouteName(s string) (kind, ns, name string, rule int, ok bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 7 || parts[3] != "rule" || parts[5] != "match" {
		return "", "", "", 0, false
	}
	rule, err := strconv.Atoi(parts[4])
	if err != nil {
		return "", "", "", 0, false
	}
	return parts[0], parts[1], parts[2], rule, true
}

// reportGaps reports the fleet's route module gaps when they changed (t.mu held).
func (t *term) reportGaps() {
	gaps := t.routeModuleGaps()
	if equalGaps(gaps, t.gaps) {
		return
	}
	t.gaps = gaps
	t.report.ModulesMissing(gaps)
}

func equalGaps(a, b []controller.RouteModuleGap) bool {
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
