package proxy_test

import (
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// BenchmarkH1ProxyRetryPolicy is BenchmarkH1ProxyAllocs on a route with a retry policy whose
// tries all succeed: the cost of being ready to retry (a tryWriter and its header copy for the
// first try, the request copy) when nothing is retried. A route without a policy pays nothing:
// BenchmarkH1ProxyAllocs keeps its allocations.
func BenchmarkH1ProxyRetryPolicy(b *testing.B) {
	benchH1ProxyListener(b, func(l *irv1.Listener) {
		l.GetServers()[0].GetVirtualHosts()[0].GetRoutes()[0].Retry = &irv1.Retry{Codes: []uint32{503}, Attempts: 2}
	}, func(*irv1.Cluster) {}, "")
}
