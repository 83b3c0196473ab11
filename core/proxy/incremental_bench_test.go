package proxy_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// BenchmarkApplyRouteChange is the table build per route change: each snapshot changes one
// route's path (alternating between two), on a table of n routes (n/2 hostnames × 2 routes, a
// cluster per hostname, as an HTTPRoute per Service), built in full (every route and cluster
// compiled again, as before incremental builds) and incrementally (only the changed route; the
// rest shared with the serving table), back to back in one run; "shared" is incremental with
// snapshots that share every unchanged message with the previous one (a new route, virtual host,
// server, listener and snapshot each time, as the translator and the agent make them) applied
// to a proxy with Options.SharedMessages, which hashes only the changed virtual host.
func BenchmarkApplyRouteChange(b *testing.B) {
	be := newBackend(b, "be", nil)
	for _, n := range []int{1_000, 5_000, 20_000} {
		snap := routesSnapshot(b, n, be)
		at := n / 4 // the changed route's virtual host
		changed := snap.Listeners[0].Servers[0].VirtualHosts[at].Routes[0]
		for _, build := range []string{"full", "incremental", "shared"} {
			b.Run(fmt.Sprintf("routes=%d/build=%s", n, build), func(b *testing.B) {
				p := newProxy(b)
				if build == "shared" {
					p = proxy.New(proxy.Options{Log: testLogger(), Registry: registry(), SharedMessages: true})
					b.Cleanup(func() { _ = p.Close(context.Background()) })
				}
				proxy.SetFullBuilds(p, build == "full")
				apply(b, p, snap)
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := processCPU(b)
				n := 0
				for i := 0; b.Loop(); i++ {
					next := snap
					match := core.MustConfig("route.testpath", map[string]string{"prefix": "/v" + strconv.Itoa(i%2)})
					if build == "shared" {
						next = sharedRouteChange(snap, at, match)
					} else {
						changed.Match = match
					}
					next.Version = build + strconv.Itoa(i)
					if err := p.Apply(context.Background(), next); err != nil {
						b.Fatal(err)
					}
					n++
				}
				// On a loaded machine the wall time per op is mostly waiting for a core; the
				// process's CPU time (GC included) is what the build costs.
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(n), "cpu-ms/op")
			})
		}
	}
}

// routesSnapshot is n routes over n/2 hostnames, each hostname's two routes to a cluster of its
// own with be as its endpoint.
func routesSnapshot(b testing.TB, n int, be *testBackend) *irv1.Snapshot {
	srv := server("")
	var clusters []*irv1.Cluster
	for i := range n / 2 {
		host := fmt.Sprintf("svc-%d.example.com", i)
		if i%2 == 1 {
			host = "*." + host
		}
		name := fmt.Sprintf("ns/svc-%d", i)
		srv.VirtualHosts = append(srv.VirtualHosts, vhost(host,
			route(fmt.Sprintf("ns/r-%d/0", i), "/api", backend(name, 1)),
			route(fmt.Sprintf("ns/r-%d/1", i), "/", backend(name, 1))))
		clusters = append(clusters, cluster(name, be))
	}
	return snapshot(b, []*irv1.Listener{httpListener(0, srv)}, clusters)
}

// sharedRouteChange is snap with the first route of virtual host i given match: new messages
// for it and everything above it, every other message shared.
func sharedRouteChange(snap *irv1.Snapshot, i int, match *irv1.ModuleConfig) *irv1.Snapshot {
	l := irv1.Shallow(snap.Listeners[0])
	srv := irv1.Shallow(l.Servers[0])
	vh := irv1.Shallow(srv.VirtualHosts[i])
	r := irv1.Shallow(vh.Routes[0])
	r.Match = match
	vh.Routes = append([]*irv1.Route{r}, vh.Routes[1:]...)
	srv.VirtualHosts = append([]*irv1.VirtualHost(nil), srv.VirtualHosts...)
	srv.VirtualHosts[i] = vh
	l.Servers = []*irv1.Server{srv}
	out := irv1.Shallow(snap)
	out.Listeners = []*irv1.Listener{l}
	return out
}
