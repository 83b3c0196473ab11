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
// proxy whose socket is already bound: what a large config change costs.
func BenchmarkApply10kRoutes(b *testing.B) {
	be := newBackend(b, "be", nil)
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
	snap := snapshot(b, []*irv1.Listener{httpListener(0, srv)}, []*irv1.Cluster{cluster("be", be)})
	p := newProxy(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		snap.Version = strconv.Itoa(i)
		if err := p.Apply(context.Background(), snap); err != nil {
			b.Fatal(err)
		}
	}
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
