package extauth_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"

	"github.com/coxswain-labs/coxswain/modules/filters/extauth"
)

// BenchmarkCheck is one request through the engine with a check against a local auth service
// that allows (HTTP forward-auth, gRPC ext_authz), next to the same route without the filter
// ("none"). p50/p99 are per request; what a check adds is the difference to "none".
func BenchmarkCheck(b *testing.B) {
	httpAuth := startRecorder(b, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	grpcAuth := startAuthServer(b, func(*authv3.CheckRequest) *authv3.CheckResponse {
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}
	})
	for _, tc := range []struct {
		name string
		env  func() *env
	}{
		{"none", func() *env { return startEnv(b, extauth.Config{}, nil, false, 0) }},
		{"http", func() *env { return startEnv(b, httpCfg(), []uint32{httpAuth.port}, false, 0) }},
		{"grpc", func() *env { return startEnv(b, grpcCfg(), []uint32{grpcAuth.port}, false, 0) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := tc.env()
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				resp, _ := e.get(b, "/x")
				lat = append(lat, time.Since(start))
				if resp.StatusCode != 200 {
					b.Fatalf("%d", resp.StatusCode)
				}
				e.backend.take()
				httpAuth.take()
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
