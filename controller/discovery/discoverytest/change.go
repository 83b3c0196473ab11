package discoverytest

import (
	"encoding/json"
	"slices"
	"strconv"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

// RouteChange is base (one listener with one server, as translatortest.SyntheticStore
// translates) with the path of one route in the middle of the table changed and every Gateway
// at generation gen, sealed. It shares every other message with base, as the incremental
// translator's snapshots do, so that making it costs what the change costs, not a copy of
// thousands of routes.
func RouteChange(base *irv1.Snapshot, gen int64) (*irv1.Snapshot, error) {
	l := irv1.Shallow(base.GetListeners()[0])
	srv := irv1.Shallow(l.GetServers()[0])
	vhs := slices.Clone(srv.GetVirtualHosts())
	k := len(vhs) / 2
	vh := irv1.Shallow(vhs[k])
	vh.Routes = slices.Clone(vh.GetRoutes())
	r := irv1.Shallow(vh.GetRoutes()[0])
	m, err := json.Marshal(httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/changed-" + strconv.FormatInt(gen, 10)}})
	if err != nil {
		return nil, err
	}
	r.Match = &irv1.ModuleConfig{Id: httproute.ModuleID, Json: m}
	vh.Routes[0], vhs[k] = r, vh
	srv.VirtualHosts = vhs
	l.Servers = []*irv1.Server{srv}
	out := &irv1.Snapshot{Listeners: []*irv1.Listener{l}, Clusters: base.GetClusters(), Secrets: base.GetSecrets()}
	for _, g := range base.GetGateways() {
		out.Gateways = append(out.Gateways, &irv1.GatewayGeneration{Namespace: g.GetNamespace(), Name: g.GetName(), Generation: gen})
	}
	return out, irv1.Seal(out)
}
