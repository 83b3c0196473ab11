package grpcroute_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
)

// BenchmarkGRPCUnary measures unary gRPC calls (grpc.testing.TestService/EmptyCall) from one
// grpc-go client connection, straight to the grpc-go backend and through the proxy (route.grpc
// matching service and method, h2c on both sides): one call at a time ("serial"), and 8 calls in
// flight per GOMAXPROCS ("parallel"). It reports calls per second and the median and 99th
// percentile latency.
func BenchmarkGRPCUnary(b *testing.B) {
	be := grpctest.Start(b, "a")
	addrs := startProxy(b, []*irv1.Listener{plainListener("l", server("", vhost("",
		grpcRoute("r", methodMatch(grpcroute.MatchExact, grpctest.Service, "EmptyCall"), backend("a", 1)))))},
		[]*irv1.Cluster{h2cCluster("a", be)})
	for _, mode := range []struct {
		name     string
		parallel int
	}{{"serial", 0}, {"parallel", 8}} {
		for _, bc := range []struct {
			name, addr string
			deadline   time.Duration
		}{{"direct", be.Addr, 0}, {"proxy", addrs[0], 0}, {"proxy-deadline", addrs[0], 10 * time.Second}} {
			b.Run(mode.name+"/"+bc.name, func(b *testing.B) {
				benchUnary(b, grpctest.Dial(b, bc.addr), mode.parallel, bc.deadline)
			})
		}
	}
}

// benchUnary makes b.N calls, one at a time when parallel is 0, else from parallel goroutines
// per GOMAXPROCS, and reports calls/s and latency percentiles. With a deadline each call carries
// it (grpc-timeout), which the proxy turns into a deadline of its own.
func benchUnary(b *testing.B, c testgrpc.TestServiceClient, parallel int, deadline time.Duration) {
	ctx := context.Background()
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil { // connect outside the timing
		b.Fatal(err)
	}
	var mu sync.Mutex
	var all []time.Duration
	calls := func(next func() bool) {
		lat := make([]time.Duration, 0, 1024)
		for next() {
			t0 := time.Now()
			cctx, cancel := ctx, context.CancelFunc(func() {})
			if deadline > 0 {
				cctx, cancel = context.WithTimeout(ctx, deadline)
			}
			_, err := c.EmptyCall(cctx, &testgrpc.Empty{})
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(t0))
		}
		mu.Lock()
		all = append(all, lat...)
		mu.Unlock()
	}
	b.ReportAllocs()
	start := time.Now()
	if parallel == 0 {
		calls(b.Loop)
	} else {
		b.SetParallelism(parallel)
		b.ResetTimer()
		start = time.Now()
		b.RunParallel(func(pb *testing.PB) { calls(pb.Next) })
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
