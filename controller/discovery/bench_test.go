package discovery_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/controller/discovery/discoverytest"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core/discovery/delta"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	_ "github.com/coxswain-labs/coxswain/modules/filters/headers/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/redirect/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/rewrite/translate"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

// benchSnapshot translates one Gateway with n HTTPRoutes (own hostname, two rules each) to one
// Service with three endpoints, as controller's BenchmarkTranslate does, and moves its listener
// to 127.0.0.1 on any free port so many proxies can bind it in one process.
func benchSnapshot(b testing.TB, n int) *irv1.Snapshot {
	b.Helper()
	s := translatortest.SyntheticStore(n)
	res := translator.Translate(context.Background(), s, translator.Options{Registry: fullRegistry, AllowLoopbackEndpoints: true})
	snap := res.Snapshot
	if len(snap.GetListeners()) != 1 || len(res.Problems) > 0 {
		b.Fatalf("synthetic translation: %d listeners, problems %v", len(snap.GetListeners()), res.Problems)
	}
	snap.Listeners[0].Address, snap.Listeners[0].Port = "127.0.0.1", 0
	if err := irv1.Seal(snap); err != nil {
		b.Fatal(err)
	}
	return snap
}

// endpointChange is base after an EndpointSlice change (one endpoint's port) and a new Gateway
// generation, so the gate has something to wait for: what most pushes look like.
func endpointChange(b testing.TB, base *irv1.Snapshot, gen int64) *irv1.Snapshot {
	b.Helper()
	out := &irv1.Snapshot{Listeners: base.GetListeners(), Secrets: base.GetSecrets()}
	for _, c := range base.GetClusters() {
		c2 := proto.Clone(c).(*irv1.Cluster)
		if len(c2.Endpoints) > 0 {
			c2.Endpoints[0].Port = uint32(10000 + gen%50000)
		}
		out.Clusters = append(out.Clusters, c2)
	}
	for _, g := range base.GetGateways() {
		out.Gateways = append(out.Gateways, &irv1.GatewayGeneration{Namespace: g.GetNamespace(), Name: g.GetName(), Generation: gen})
	}
	if err := irv1.Seal(out); err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkSnapshotCodec: size, encode and decode time of a 5,000- and a 20,000-route snapshot,
// and what the same changes cost as deltas (core/discovery/delta), on both sides: a route
// change (one virtual host replaced, as discoverytest.RouteChange makes it) and an endpoints
// change (endpointChange: every cluster a new message, one endpoint's port changed). The
// controller diffs and encodes a delta once per publication and base; the proxy decodes it,
// rebuilds the snapshot on its base and reseals it with a Sealer that sealed the base before.
func BenchmarkSnapshotCodec(b *testing.B) {
	for _, n := range []int{5000, 20000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) { snapshotCodec(b, n) })
	}
}

func snapshotCodec(b *testing.B, n int) {
	snap := benchSnapshot(b, n)
	full, err := proto.Marshal(snap)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full/encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proto.Marshal(snap); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(full)), "bytes")
	})
	b.Run("full/decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(full, &irv1.Snapshot{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(full)), "bytes")
	})
	b.Run("full/seal", func(b *testing.B) { // the content hash the controller computes per snapshot
		s := proto.Clone(snap).(*irv1.Snapshot)
		for b.Loop() {
			if err := irv1.Seal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Whether a delta is worth sending: the exact size (proto.Size, a walk of every message, as
	// every push did before session 15) and the names' lower bound that answers first.
	b.Run("full/size", func(b *testing.B) {
		for b.Loop() {
			_ = proto.Size(snap)
		}
	})
	b.Run("delta-size-check", func(b *testing.B) {
		for b.Loop() {
			if !discovery.DeltaLarger(snap, 400) {
				b.Fatal("a 400-byte delta not smaller than the snapshot")
			}
		}
	})
	routeNext, err := discoverytest.RouteChange(snap, 2)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		next *irv1.Snapshot
	}{{"delta-route-change", routeNext}, {"delta-endpoints-change", endpointChange(b, snap, 2)}} {
		b.Run(c.name+"/diff-encode", func(b *testing.B) { // the controller, once per publication and base
			b.ReportAllocs()
			var size int
			for b.Loop() {
				d, err := delta.Diff(snap, c.next)
				if err != nil {
					b.Fatal(err)
				}
				data, err := proto.Marshal(d)
				if err != nil {
					b.Fatal(err)
				}
				size = len(data)
			}
			b.ReportMetric(float64(size), "bytes")
		})
		b.Run(c.name+"/rebuild-seal", func(b *testing.B) { // the proxy, per push
			d, _ := delta.Diff(snap, c.next)
			data, _ := proto.Marshal(d)
			base := &irv1.Snapshot{}
			if err := proto.Unmarshal(full, base); err != nil { // as the proxy holds it
				b.Fatal(err)
			}
			var sealer irv1.Sealer
			if err := sealer.Seal(proto.Clone(base).(*irv1.Snapshot)); err != nil {
				b.Fatal(err)
			}
			if err := sealer.Seal(base); err != nil { // the base's own messages remembered
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				got := &discv1.Delta{}
				if err := proto.Unmarshal(data, got); err != nil {
					b.Fatal(err)
				}
				out, err := delta.Apply(base, got, c.next.GetVersion())
				if err != nil {
					b.Fatal(err)
				}
				if err := sealer.Seal(out); err != nil || out.GetVersion() != c.next.GetVersion() {
					b.Fatalf("resealed %s, %v; want %s", out.GetVersion(), err, c.next.GetVersion())
				}
			}
		})
	}
	b.Run("tailor-dedicated", func(b *testing.B) { // a dedicated proxy's cut of the snapshot, remembering nothing
		b.ReportAllocs()
		for b.Loop() {
			if _, err := discovery.DiscoveryTailor(snap, "bench", "gw"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Per publication of a route change (snap and routeNext in turn, each one virtual host
	// apart from the other): the hand-over's look at the snapshot (the module IDs it names) and
	// a dedicated proxy's cut, as before session 16 (plain: a walk of every route, a clone and a
	// seal of the whole snapshot) and with what the term keeps across publications (kept).
	turns := []*irv1.Snapshot{snap, routeNext}
	b.Run("hand-over-route-change/plain", func(b *testing.B) {
		b.ReportAllocs()
		cpu := processCPU()
		for i := 0; b.Loop(); i++ {
			if discovery.PlainModulesOf(turns[i%2]) == 0 {
				b.Fatal("no modules")
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("hand-over-route-change/kept", func(b *testing.B) {
		c := discovery.NewCutter("bench", "gw")
		for _, s := range turns { // the first look is a walk of everything
			c.HandOver(s)
		}
		b.ReportAllocs()
		cpu := processCPU()
		for i := 0; b.Loop(); i++ {
			if c.HandOver(turns[i%2]) == 0 {
				b.Fatal("no modules")
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("tailor-dedicated-route-change/plain", func(b *testing.B) {
		b.ReportAllocs()
		cpu := processCPU()
		for i := 0; b.Loop(); i++ {
			if _, err := discovery.PlainTailor(turns[i%2], "bench", "gw"); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("tailor-dedicated-route-change/kept", func(b *testing.B) {
		c := discovery.NewCutter("bench", "gw")
		want := map[string]string{}
		for _, s := range turns {
			t, err := discovery.PlainTailor(s, "bench", "gw")
			if err != nil {
				b.Fatal(err)
			}
			want[s.GetVersion()] = t.GetVersion()
			if _, err := c.Tailor(s); err != nil { // the first cut is of everything
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		cpu := processCPU()
		for i := 0; b.Loop(); i++ {
			got, err := c.Tailor(turns[i%2])
			if err != nil || got.GetVersion() != want[turns[i%2].GetVersion()] {
				b.Fatalf("tailored %s, %v; cloning and cutting gives %s", got.GetVersion(), err, want[turns[i%2].GetVersion()])
			}
		}
		reportCPU(b, cpu)
	})
	b.Run("proxy-apply", func(b *testing.B) { // what a proxy does with a push besides decoding
		px := proxy.New(proxy.Options{Log: logger(b), Registry: fullRegistry})
		defer func() { _ = px.Close(context.Background()) }()
		for i := 0; b.Loop(); i++ {
			if err := px.Apply(context.Background(), endpointChange(b, snap, int64(i+2))); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPushLatency: from Publish to each proxy's acknowledgement (p50, p99 over every proxy
// and push) and to the last one's ("all"), with 1 and 20 proxies connected over mTLS on
// loopback, at 5,000 routes. engine=proxy proxies build and swap a real routing table per push;
// engine=decode-only ones only decode it, which shows the protocol's own share.
func BenchmarkPushLatency(b *testing.B) {
	base := benchSnapshot(b, 5000)
	for _, engine := range []string{"proxy", "decode-only"} {
		for _, n := range []int{1, 20} {
			b.Run(fmt.Sprintf("engine=%s/proxies=%d/routes=5000", engine, n), func(b *testing.B) {
				pushLatency(b, base, engine, n)
			})
		}
	}
}

func pushLatency(b *testing.B, base *irv1.Snapshot, engine string, n int) {
	s := startServer(b)
	s.lead(b)
	s.publish(b, endpointChange(b, base, 1))
	for i := range n {
		o := proxyOpts{node: fmt.Sprintf("p%02d", i), token: "shared-token"}
		if engine == "decode-only" {
			o.engine = &discoverytest.DecodeOnly{}
		}
		startProxy(b, s, o)
	}
	gw := "bench/gw"
	s.waitApplied(b, gw, 1)
	var each, all []time.Duration
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		gen := int64(i + 2)
		snap := endpointChange(b, base, gen)
		cpu0 := processCPU()
		start := time.Now()
		s.publish(b, snap)
		for s.report.appliedGen(gw) < gen {
			<-s.report.changed
		}
		all = append(all, time.Since(start))
		cpu += processCPU() - cpu0
		for _, p := range s.Fleet().Proxies {
			each = append(each, p.AckedAt.Sub(start))
		}
	}
	b.StopTimer()
	slices.Sort(each)
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(each[len(each)/2]), "p50-ms")
	b.ReportMetric(ms(each[(len(each)*99)/100]), "p99-ms")
	b.ReportMetric(ms(all[len(all)/2]), "all-acked-p50-ms")
	b.ReportMetric(ms(cpu)/float64(len(all)), "process-cpu-ms/push")
}

// reportCPU reports the process's CPU time since cpu per op (GC included): the figure that
// holds on the loaded machine, where wall time per op is mostly waiting for a core.
func reportCPU(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(processCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// processCPU is the CPU time this process has used (user + system).
func processCPU() time.Duration {
	var ru runtimeRusage
	getrusage(&ru)
	return ru.total()
}
