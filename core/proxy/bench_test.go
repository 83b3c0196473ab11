package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// BenchmarkApply10kRoutes builds and swaps in a 10,000-route table (5,000 hostnames × 2 routes) on a
// proxy whose socket is already bound: what a large config change costs. Each snapshot changes one
// route's path, which takes the full rebuild (BenchmarkApplyEndpointsOnly is the endpoints' path).
func BenchmarkApply10kRoutes(b *testing.B) {
	be := newBackend(b, "be", nil)
	snap := snapshot10k(b, cluster("be", be))
	first := snap.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
	p := newProxy(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		first.Match = core.MustConfig("route.testpath", map[string]string{"prefix": "/api" + strconv.Itoa(i%2)})
		snap.Version = strconv.Itoa(i)
		if err := p.Apply(context.Background(), snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyEndpointsOnly applies snapshots of the same 10,000-route table whose one cluster
// alternates between one and two endpoints: what the controller's endpoints fast path costs the
// proxy (an in-place update, no rebuild).
func BenchmarkApplyEndpointsOnly(b *testing.B) {
	be, be2 := newBackend(b, "be", nil), newBackend(b, "be2", nil)
	one, two := cluster("be", be), cluster("be", be, be2)
	snap := snapshot10k(b, one)
	p := newProxy(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		snap.Clusters[0] = one
		if i%2 == 1 {
			snap.Clusters[0] = two
		}
		snap.Version = strconv.Itoa(i)
		if err := p.Apply(context.Background(), snap); err != nil {
			b.Fatal(err)
		}
	}
}

// snapshot10k is 5,000 hostnames × 2 routes, all to cluster c.
func snapshot10k(b *testing.B, c *irv1.Cluster) *irv1.Snapshot {
	srv := server("")
	for i := range 5_000 {
		host := fmt.Sprintf("svc-%d.example.com", i)
		if i%2 == 1 {
			host = "*." + host
		}
		srv.VirtualHosts = append(srv.VirtualHosts, vhost(host,
			route(fmt.Sprintf("r/%d/0", i), "/api", backend("be", 1)),
			route(fmt.Sprintf("r/%d/1", i), "/", backend("be", 1))))
	}
	return snapshot(b, []*irv1.Listener{httpListener(0, srv)}, []*irv1.Cluster{c})
}

// BenchmarkProxyRequest is one keep-alive request through the whole data path over loopback:
// listener, routing, filter chain, balancer, forwarder, a real backend.
func BenchmarkProxyRequest(b *testing.B) {
	be := newBackend(b, "be", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	rt := route("r", "/", backend("be", 1))
	rt.Filters = []*irv1.ModuleConfig{core.MustConfig("filter.test.set_request_header", map[string]string{"name": "X-Test", "value": "1"})}
	l := httpListener(0, server("", vhost("example.com", rt)))
	p := newProxy(b)
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cluster("be", be)}))
	c := newClient(addrOf(b, p, l.Name), nil)
	url := hostURL("http", "example.com", "/bench")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if r := c.get(url); r.err != nil || r.status != 200 {
				b.Fatalf("%d %v", r.status, r.err)
			}
		}
	})
}
