package proxy_test

import (
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
)

// TestBalancerFeedbackTCP: a TCP pick is reported once, right after the dial, failed when the
// dial failed. (The HTTP side is modules/lb/lbtest's TestFeedback.)
func TestBalancerFeedbackTCP(t *testing.T) {
	echo := newTCPEcho(t, "a")
	live := l4Cluster("live", irv1.Cluster_TCP, echo.port)
	live.Balancer = &irv1.ModuleConfig{Id: "lb.test_feedback"}
	dead := l4Cluster("dead", irv1.Cluster_TCP, closedPort(t))
	dead.Balancer = &irv1.ModuleConfig{Id: "lb.test_feedback"}
	toLive := portKeyed("TCP", closedPort(t), l4Route("route.tcp", "live", backend("live", 1)))
	toDead := portKeyed("TCP", closedPort(t), l4Route("route.tcp", "dead", backend("dead", 1)))
	p := newL4Proxy(t, proxy.Limits{})
	apply(t, p, snapshot(t, []*irv1.Listener{toLive, toDead}, []*irv1.Cluster{live, dead}))
	for len(testmod.FeedbackCalls) > 0 {
		<-testmod.FeedbackCalls
	}
	next := func() testmod.FeedbackCall {
		t.Helper()
		select {
		case c := <-testmod.FeedbackCalls:
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no Done from the engine")
			return testmod.FeedbackCall{}
		}
	}

	if g := greeting(t, addrOf(t, p, toLive.Name)); g != "a" {
		t.Fatalf("greeting %q, want a", g)
	}
	if c := next(); c.Failed || c.RTT <= 0 || c.Endpoint.Port != echo.port {
		t.Errorf("live dial: Done(%v, %v, failed=%v), want the echo endpoint, not failed", c.Endpoint, c.RTT, c.Failed)
	}
	_ = greeting(t, addrOf(t, p, toDead.Name)) // the proxy closes it: nothing to dial
	if c := next(); !c.Failed {
		t.Errorf("refused dial: Done(%v, %v, failed=false), want failed", c.Endpoint, c.RTT)
	}
	select {
	case c := <-testmod.FeedbackCalls:
		t.Errorf("an extra Done: %+v", c)
	default:
	}
}
