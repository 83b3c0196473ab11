package proxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

// routingState compiles a catch-all server with n virtual hosts, each one route, alternating exact
// hostnames and wildcards, and returns it with one request per hostname.
func routingState(tb testing.TB, n int) (*ListenerState, []*http.Request) {
	tb.Helper()
	reg := core.NewRegistry(append(testmod.Modules(), &roundrobin.RoundRobin{})...)
	p := New(Options{Log: zap.NewNop(), Registry: reg})
	snap := &irv1.Snapshot{Clusters: []*irv1.Cluster{{Name: "c", Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: 9}}}}}
	bc := core.NewBuildContext(context.Background(), zap.NewNop(), reg, snap)
	tb.Cleanup(func() { _ = bc.Close() })
	b := &builder{p: p, bc: bc, t: &table{clusterSet: newClusterSet()}, secrets: map[string]*irv1.Secret{}, clusters: map[string]*cluster{}}
	if err := b.cluster(snap.Clusters[0]); err != nil {
		tb.Fatal(err)
	}
	srv := &irv1.Server{}
	reqs := make([]*http.Request, n)
	for i := range n {
		host, reqHost := fmt.Sprintf("host-%d.example.com", i), ""
		reqHost = host
		if i%2 == 1 {
			host, reqHost = "*."+host, "api."+host
		}
		srv.VirtualHosts = append(srv.VirtualHosts, &irv1.VirtualHost{Hostname: host, Routes: []*irv1.Route{{
			Name:     fmt.Sprintf("route-%d", i),
			Match:    core.MustConfig("route.testpath", map[string]string{"prefix": "/api"}),
			Backends: []*irv1.Backend{{Cluster: "c", Weight: 1}},
		}}})
		reqs[i] = httptest.NewRequest(http.MethodGet, "http://"+reqHost+":8080/api/v1", nil)
	}
	ls := &ListenerState{}
	s, err := b.server(ls, srv)
	if err != nil {
		tb.Fatal(err)
	}
	if err := ls.servers.add("", s); err != nil {
		tb.Fatal(err)
	}
	return ls, reqs
}

func TestRouteLookupAllocatesNothing(t *testing.T) {
	ls, reqs := routingState(t, 100)
	for i, r := range reqs {
		if rt, _ := ls.route(r); rt == nil || rt.name != fmt.Sprintf("route-%d", i) {
			t.Fatalf("request for %s routed to %v", r.Host, rt)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = ls.route(reqs[51]) }); n != 0 {
		t.Fatalf("route lookup allocates %v times", n)
	}
}

// BenchmarkRouteLookup is Host → Server → VirtualHost → Route with 1, 1,000 and 10,000 routes over
// distinct hostnames (half exact, half wildcard); it must stay flat and allocation-free.
func BenchmarkRouteLookup(b *testing.B) {
	for _, n := range []int{1, 1_000, 10_000} {
		ls, reqs := routingState(b, n)
		// hot: one host over and over (the algorithmic cost); spread: every hostname in turn (adds the
		// cache misses of a big table).
		b.Run(fmt.Sprintf("routes=%d/hot", n), func(b *testing.B) {
			b.ReportAllocs()
			r := reqs[len(reqs)/2]
			for b.Loop() {
				if rt, _ := ls.route(r); rt == nil {
					b.Fatal("no route")
				}
			}
		})
		b.Run(fmt.Sprintf("routes=%d/spread", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if rt, _ := ls.route(reqs[i]); rt == nil {
					b.Fatal("no route")
				}
				i++
				if i == len(reqs) {
					i = 0
				}
			}
		})
	}
}
