package inprocess

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
)

type reporter struct {
	mu      sync.Mutex
	applied []string
	unbound map[string][]controller.ListenerFailure
}

func (r *reporter) Applied(gws []*irv1.GatewayGeneration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range gws {
		r.applied = append(r.applied, g.GetName())
	}
}

func (r *reporter) Pending(*irv1.GatewayGeneration, string) {}

func (r *reporter) Unbound(g *irv1.GatewayGeneration, fs []controller.ListenerFailure) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unbound[g.GetName()] = fs
}

func (r *reporter) ModulesMissing([]controller.RouteModuleGap) {}

func (r *reporter) unboundOf(name string) []controller.ListenerFailure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unbound[name]
}

// TestUnbound: the in-process proxy applies a snapshot one of whose ports is taken, reports the
// Gateway listener as unbound, and clears it once the proxy binds the freed port on its own.
func TestUnbound(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	port := uint32(held.Addr().(*net.TCPAddr).Port)
	lst := func(gw string, port uint32) *irv1.Listener {
		return &irv1.Listener{Name: "127.0.0.1:" + strconv.Itoa(int(port)) + "/HTTP", Address: "127.0.0.1", Port: port, Protocol: "HTTP",
			Servers: []*irv1.Server{{Sources: []string{"ns/" + gw + "/http"}}}}
	}
	snap := &irv1.Snapshot{Listeners: []*irv1.Listener{lst("free", 0), lst("busy", port)},
		Gateways: []*irv1.GatewayGeneration{{Namespace: "ns", Name: "busy", Generation: 1}, {Namespace: "ns", Name: "free", Generation: 1}}}
	if err := irv1.Seal(snap); err != nil {
		t.Fatal(err)
	}
	rep := &reporter{unbound: map[string][]controller.ListenerFailure{}}
	pub, err := New(Options{Log: zaptest.NewLogger(t), Registry: core.NewRegistry(&listener.HTTP{})})(context.Background(), rep)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close(context.Background()) }()
	if err := pub.Publish(context.Background(), snap); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if fs := rep.unboundOf("busy"); len(fs) != 1 || fs[0].Listener != "http" || fs[0].Proxy != proxyName || fs[0].AddressNotUsable {
		t.Fatalf("busy unbound = %+v", fs)
	}
	if fs := rep.unboundOf("free"); len(fs) != 0 {
		t.Fatalf("free unbound = %+v", fs)
	}
	held.Close()
	deadline := time.Now().Add(20 * time.Second)
	for len(rep.unboundOf("busy")) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("still unbound: %+v", rep.unboundOf("busy"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
