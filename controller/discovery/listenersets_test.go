package discovery

import (
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// A dedicated proxy of Gateway infra/gw gets, with the Gateway's servers, the gate entries of the
// ListenerSets whose listeners it serves, and no other; so their generations are applied through
// it as the Gateway's is.
func TestTailorKeepsTheGatewaysListenerSets(t *testing.T) {
	snap := &irv1.Snapshot{
		Listeners: []*irv1.Listener{{Name: ":80/HTTP", Port: 80, Protocol: "HTTP", Servers: []*irv1.Server{
			{Hostname: "www.example", Sources: []string{"infra/gw/www"}},
			{Hostname: "shop.example", Sources: []string{"infra/gw/ListenerSet:shop/shop/shop", "shop/ListenerSet:shop/shop"}},
			{Hostname: "other.example", Sources: []string{"infra/other/http", "blog/ListenerSet:blog/blog"}},
		}}},
		Gateways: []*irv1.GatewayGeneration{
			{Namespace: "infra", Name: "gw", Generation: 1},
			{Namespace: "shop", Name: "ListenerSet:shop", Generation: 4},
			{Namespace: "infra", Name: "other", Generation: 1},
			{Namespace: "blog", Name: "ListenerSet:blog", Generation: 2},
		},
	}
	parents := listenerSetParents(snap)
	if p := parents[gwKey{"shop", "ListenerSet:shop"}]; p != (gwKey{"infra", "gw"}) {
		t.Errorf("parent of shop's ListenerSet = %v, want infra/gw", p)
	}
	out, err := tailor(snap, &gwKey{"infra", "gw"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(out.GetGateways()); got != "gw,ListenerSet:shop" {
		t.Errorf("gateways of infra/gw's dedicated snapshot = %s, want gw,ListenerSet:shop", got)
	}
	var hosts []string
	for _, sv := range out.GetListeners()[0].GetServers() {
		hosts = append(hosts, sv.GetHostname())
	}
	if len(hosts) != 2 || hosts[0] != "www.example" || hosts[1] != "shop.example" {
		t.Errorf("servers = %v, want www.example and shop.example", hosts)
	}
	s := &session{gw: &gwKey{"infra", "gw"}, t: &term{latest: &published{parents: parents}}}
	if !s.serves(gwKey{"shop", "ListenerSet:shop"}) || s.serves(gwKey{"blog", "ListenerSet:blog"}) {
		t.Error("a dedicated proxy serves the ListenerSets of its Gateway, and only those")
	}
}
