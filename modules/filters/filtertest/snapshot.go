package filtertest

import (
	"fmt"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

// Names in the harness snapshot.
const (
	ListenerName = "127.0.0.1:0/HTTP"
	RouteName    = "filtertest/route/rule/0/match/0"
	ClusterName  = "filtertest/backend:80"
)

// Snapshot is the sealed snapshot Start applies: one HTTP listener on 127.0.0.1 port 0, one
// virtual host, one route with filters, sending to one endpoint on backendPort. It is exported
// for tests that want to change it and apply it themselves.
func Snapshot(filters []*irv1.ModuleConfig, opts Options, backendPort uint32) (*irv1.Snapshot, error) {
	match := httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/"}}
	if opts.Match != nil {
		match = *opts.Match
	}
	route := &irv1.Route{
		Name:     RouteName,
		Match:    core.MustConfig(httproute.ModuleID, match),
		Filters:  filters,
		Backends: []*irv1.Backend{{Cluster: ClusterName, Weight: 1, Filters: opts.BackendFilters}},
	}
	snap := &irv1.Snapshot{
		Listeners: []*irv1.Listener{{
			Name: ListenerName, Address: "127.0.0.1", Port: 0, Protocol: "HTTP",
			Servers: []*irv1.Server{{
				Hostname:     opts.Hostname,
				VirtualHosts: []*irv1.VirtualHost{{Hostname: opts.Hostname, Routes: []*irv1.Route{route}}},
			}},
		}},
		Clusters: []*irv1.Cluster{{
			Name:      ClusterName,
			Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: backendPort, Weight: 1}},
		}},
	}
	if err := irv1.Seal(snap); err != nil {
		return nil, fmt.Errorf("sealing the snapshot: %w", err)
	}
	return snap, nil
}
