package grpcroute_test

import (
	"testing"

	"github.com/coxswain-labs/coxswain/modules/grpcroute"
)

// BenchmarkMatch measures one match per request shape; routing must not allocate.
func BenchmarkMatch(b *testing.B) {
	cases := []struct {
		name  string
		match grpcroute.Match
	}{
		{"any", grpcroute.Match{}},
		{"exact", methodMatch(grpcroute.MatchExact, "pkg.v1.Echo", "Say")},
		{"regex", methodMatch(grpcroute.MatchRegularExpression, `pkg\.v[0-9]+\.Echo`, "S.*")},
		{"exact+header", grpcroute.Match{Method: &grpcroute.MethodMatch{Service: "pkg.v1.Echo"},
			Headers: []grpcroute.HeaderMatch{{Name: "x-version", Value: "two"}}}},
	}
	r := grpcRequest("/pkg.v1.Echo/Say", "x-version", "two")
	for _, c := range cases {
		m, err := grpcroute.New(c.match)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !m.Match(r) {
					b.Fatal("no match")
				}
			}
		})
	}
}
