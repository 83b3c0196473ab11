package grpcroute_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
)

// A gRPC route's open circuit breaker answers UNAVAILABLE (the engine's 503, mapped by the
// route's error writer) without trying the endpoint; a healthy endpoint behind a breaker is
// served as usual. gRPC errors a backend returns are HTTP 200 and do not count: only failed
// exchanges (here, connections refused) do.
func TestCircuitBreakerUnavailable(t *testing.T) {
	live := grpctest.Start(t, "live")
	dead := grpctest.Start(t, "dead")
	dead.Stop()
	cb := &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 60_000, OpenMs: 60_000, MinRequests: 2}
	liveCl, deadCl := h2cCluster("live", live), h2cCluster("dead", dead)
	liveCl.CircuitBreaker, deadCl.CircuitBreaker = cb, cb
	routes := []*irv1.Route{
		grpcRoute("GRPCRoute/ns/dead/rule/0/match/0", methodMatch("", grpctest.Service, "EmptyCall"), backend("dead", 1)),
		grpcRoute("GRPCRoute/ns/live/rule/0/match/0", methodMatch("", grpctest.Service, "UnaryCall"), backend("live", 1)),
	}
	addrs := startProxy(t, []*irv1.Listener{plainListener("l", server("", vhost("", routes...)))},
		[]*irv1.Cluster{liveCl, deadCl})
	c := grpctest.Dial(t, addrs[0])

	for i := range 2 {
		_, err := c.EmptyCall(ctxTimeout(t), &testgrpc.Empty{})
		if st := status.Convert(err); st.Code() != codes.Unavailable || strings.Contains(st.Message(), "circuit breaker") {
			t.Fatalf("call %d to the dead backend: %v, want UNAVAILABLE from the refused connect", i+1, err)
		}
	}
	_, err := c.EmptyCall(ctxTimeout(t), &testgrpc.Empty{})
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "circuit breaker open") {
		t.Fatalf("after 2 failures of min 2: %v, want UNAVAILABLE circuit breaker open", err)
	}
	for i := range 4 {
		req := &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.Unavailable), Message: "busy"}}
		if _, err := c.UnaryCall(ctxTimeout(t), req); status.Convert(err).Message() != "busy" {
			t.Fatalf("call %d to the live backend asking for an error: %v, want the backend's own", i+1, err)
		}
	}
	if got := answeredBy(t, c); got != "live" {
		t.Fatalf("after the backend's own errors: %s, want an answer from live", got)
	}
}
