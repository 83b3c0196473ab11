package roundrobin

import (
	"context"
	"strconv"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

func load(t testing.TB, json string) core.Balancer {
	t.Helper()
	bc := core.NewBuildContext(context.Background(), nil, core.NewRegistry(&RoundRobin{}), &irv1.Snapshot{})
	t.Cleanup(func() { _ = bc.Close() })
	b, err := core.Load[core.Balancer](bc, &irv1.ModuleConfig{Id: string(ModuleID), Json: []byte(json)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWeightedPicks(t *testing.T) {
	cases := []struct {
		name    string
		weights []uint32
		want    []int // picks per cycle
	}{
		{"equal weights", []uint32{1, 1, 1}, []int{1, 1, 1}},
		{"weighted endpoints", []uint32{3, 1}, []int{3, 1}},
		// NewEndpoint turns weight 0 into 1 (IR: "0 is treated as 1").
		{"zero weight counts as one", []uint32{0, 2}, []int{1, 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := load(t, "{}")
			eps := make([]*core.Endpoint, len(tc.weights))
			for i, w := range tc.weights {
				eps[i] = core.NewEndpoint("10.0.0.1", uint32(8000+i), w)
			}
			b.SetEndpoints(eps)
			cycle := 0
			for _, n := range tc.want {
				cycle += n
			}
			got := map[*core.Endpoint]int{}
			for range cycle * 10 {
				got[b.Pick(&core.PickInfo{})]++
			}
			for i, ep := range eps {
				if got[ep] != tc.want[i]*10 {
					t.Errorf("endpoint %d picked %d times, want %d", i, got[ep], tc.want[i]*10)
				}
			}
		})
	}
}

func TestNoEndpoints(t *testing.T) {
	b := load(t, "")
	if ep := b.Pick(&core.PickInfo{}); ep != nil {
		t.Fatalf("Pick before SetEndpoints = %v", ep)
	}
	b.SetEndpoints(nil)
	if ep := b.Pick(&core.PickInfo{}); ep != nil {
		t.Fatalf("Pick with no endpoints = %v", ep)
	}
}

func TestRejectsUnknownConfig(t *testing.T) {
	bc := core.NewBuildContext(context.Background(), nil, core.NewRegistry(&RoundRobin{}), &irv1.Snapshot{})
	_, err := core.Load[core.Balancer](bc, &irv1.ModuleConfig{Id: string(ModuleID), Json: []byte(`{"x":1}`)})
	if err == nil {
		t.Fatal("unknown config field accepted")
	}
}

func BenchmarkPick(b *testing.B) {
	bal := load(b, "")
	eps := make([]*core.Endpoint, 16)
	for i := range eps {
		eps[i] = core.NewEndpoint("10.0.0.1", uint32(8000+i), uint32(i%3+1))
	}
	bal.SetEndpoints(eps)
	info := &core.PickInfo{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = bal.Pick(info)
		}
	})
}

// BenchmarkPickSizes is BenchmarkPick at the sizes the other lb.* packages report.
func BenchmarkPickSizes(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			bal := load(b, "")
			eps := make([]*core.Endpoint, n)
			for i := range eps {
				eps[i] = core.NewEndpoint("10.0.0.1", uint32(8000+i), 1)
			}
			bal.SetEndpoints(eps)
			info := &core.PickInfo{}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = bal.Pick(info)
				}
			})
		})
	}
}
