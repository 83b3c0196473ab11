package e2e

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
)

// rateLimitGRPCYAML is a Gateway of its own (the example's HTTPRoutes take every hostname of
// theirs, which a GRPCRoute may not share) with a GRPCRoute whose calls are limited to 2 per hour
// per client.
func rateLimitGRPCYAML(s *grpctest.Server, port int) string {
	return grpcServiceYAML("grpc-app", "kubernetes.io/h2c", s) + fmt.Sprintf(`---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: grpc-filters}
spec:
  gatewayClassName: coxswain
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners: [{name: h2c, protocol: HTTP, port: %d}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: limited}
spec:
  parentRefs: [{name: grpc-filters}]
  hostnames: [grpc.example]
  rules:
  - filters:
    - type: ExtensionRef
      extensionRef: {group: gateway.coxswain-labs.dev, kind: RateLimit, name: grpc-calls}
    backendRefs: [{name: grpc-app, port: 50051}]
---
apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: RateLimit
metadata: {name: grpc-calls}
spec: {requests: 2, unit: Hour}
`, port)
}

// TestExamplesFiltersRateLimit serves examples/filters: /ratelimit admits its burst of 5, then
// answers 429 with the headers docs/filters.md promises; a GRPCRoute with a RateLimit answers
// RESOURCE_EXHAUSTED past its limit.
func TestExamplesFiltersRateLimit(t *testing.T) {
	port := freePort(t)
	files := exampleFiles(t, "filters", map[string]int{"port: 8090": port, "port: 9331": startBackend(t, "app").port})
	grpcPort := freePort(t)
	files["grpc-ratelimit.yaml"] = rateLimitGRPCYAML(grpctest.Start(t, "grpc-app"), grpcPort)
	s := startServe(t, files)
	get := func() (*result, error) {
		return do(context.Background(), noRedirect, request{url: fmt.Sprintf("http://127.0.0.1:%d/ratelimit/x", port)})
	}
	// Requests before the route is served do not pass the filter, so they spend nothing.
	var first *result
	eventually(t, 10*time.Second, "/ratelimit served", func() error {
		res, err := get()
		if err != nil {
			return err
		}
		if res.code != 200 || res.echo == nil {
			return fmt.Errorf("got %d %s", res.code, res.body)
		}
		first = res
		return nil
	})
	for i := range 5 {
		res := first
		if i > 0 {
			var err error
			if res, err = get(); err != nil {
				t.Fatal(err)
			}
		}
		if res.code != 200 || res.header.Get("X-RateLimit-Limit") != "5" || res.header.Get("X-RateLimit-Remaining") != strconv.Itoa(4-i) {
			t.Fatalf("request %d: %d %v", i, res.code, res.header)
		}
	}
	res, err := get()
	if err != nil {
		t.Fatal(err)
	}
	h := res.header
	if res.code != 429 || res.echo != nil || h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("past the burst: %d %v %q", res.code, h, res.body)
	}
	// 5 per minute: a token every 12 s, so at most 12 s to wait and 60 s until the bucket is full.
	if ra, _ := strconv.Atoi(h.Get("Retry-After")); ra < 1 || ra > 12 {
		t.Errorf("Retry-After %q, want 1..12", h.Get("Retry-After"))
	}
	if reset, _ := strconv.Atoi(h.Get("X-RateLimit-Reset")); reset < 49 || reset > 60 {
		t.Errorf("X-RateLimit-Reset %q, want about 60", h.Get("X-RateLimit-Reset"))
	}
	for _, p := range s.status().Report.Problems {
		if p.Object == "HTTPRoute default/ratelimit" || p.Object == "GRPCRoute default/limited" {
			t.Errorf("problem: %+v", p)
		}
	}

	c := grpctest.Dial(t, fmt.Sprintf("127.0.0.1:%d", grpcPort), grpc.WithAuthority("grpc.example"))
	call := func() error {
		_, err := c.UnaryCall(rpcCtx(t), &testgrpc.SimpleRequest{})
		return err
	}
	eventually(t, 10*time.Second, "the GRPCRoute served", call)
	if err := call(); err != nil {
		t.Fatalf("second call: %v", err)
	}
	err = call()
	if st := grpcstatus.Convert(err); st.Code() != codes.ResourceExhausted {
		t.Errorf("third call: %v, want RESOURCE_EXHAUSTED", err)
	}
}
