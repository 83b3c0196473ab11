package agent

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/core/discovery/delta"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// engine records what it was given: what the agent decided to apply is under test here.
type engine struct{ applied []*irv1.Snapshot }

func (e *engine) Apply(_ context.Context, s *irv1.Snapshot) error {
	e.applied = append(e.applied, s)
	return nil
}

func (e *engine) Version() string {
	if len(e.applied) == 0 {
		return ""
	}
	return e.applied[len(e.applied)-1].GetVersion()
}
func (e *engine) Bound() []proxy.BoundListener      { return nil }
func (e *engine) Failed() []proxy.ListenerFailure   { return nil }
func (e *engine) ListenersChanged() <-chan struct{} { return nil }

func clusterSnapshot(t *testing.T, ports ...uint32) *irv1.Snapshot {
	t.Helper()
	s := &irv1.Snapshot{Listeners: []*irv1.Listener{{Name: ":80/HTTP", Port: 80, Protocol: "HTTP"}}}
	for i, p := range ports {
		s.Clusters = append(s.Clusters, &irv1.Cluster{Name: fmt.Sprintf("c%d", i), Endpoints: []*irv1.Endpoint{{Address: "10.0.0.1", Port: p}}})
	}
	if err := irv1.Seal(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func fullPush(t *testing.T, s *irv1.Snapshot) *discv1.Push {
	b, err := proto.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return &discv1.Push{Snapshot: b, Version: s.GetVersion()}
}

func deltaPush(t *testing.T, base, next *irv1.Snapshot, version string) *discv1.Push {
	d, err := delta.Diff(base, next)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return &discv1.Push{Delta: b, Version: version}
}

// TestApplyDeltaChecksTheVersion: a delta is applied only when the rebuilt snapshot reseals to
// the push's version. One that does not (the controller and the proxy disagree on the base),
// one against another base, or one the proxy has no base for is answered with a Nack of reason
// DELTA_MISMATCH and leaves the engine as it was; after the full snapshot that follows, deltas
// apply again. The engine gets listeners localized to ListenAddress while the base stays the
// controller's.
func TestApplyDeltaChecksTheVersion(t *testing.T) {
	eng := &engine{}
	a, err := New(Options{Log: zap.NewNop(), Engine: eng, Addresses: []string{"127.0.0.1:1"}, TokenFile: "t", TrustBundleFile: "b",
		Node: "n", ListenAddress: "127.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ack := func(req *discv1.StreamRequest, want *irv1.Snapshot) {
		t.Helper()
		if req.GetAck().GetVersion() != want.GetVersion() {
			t.Fatalf("reply %v, want an Ack of %s", req, want.GetVersion())
		}
		got := eng.applied[len(eng.applied)-1]
		if got.GetListeners()[0].GetAddress() != "127.0.0.2" {
			t.Fatalf("engine got listener address %q", got.GetListeners()[0].GetAddress())
		}
		clean := proto.Clone(got).(*irv1.Snapshot)
		clean.Listeners[0].Address = ""
		if !proto.Equal(clean, want) {
			t.Fatalf("engine got %v, want %v", clean, want)
		}
	}
	mismatch := func(req *discv1.StreamRequest) {
		t.Helper()
		n := req.GetNack()
		if n == nil || n.GetReason() != discv1.NackReason_NACK_REASON_DELTA_MISMATCH {
			t.Fatalf("reply %v, want a Nack of reason DELTA_MISMATCH", req)
		}
	}

	v1, v2, v3 := clusterSnapshot(t, 1, 2), clusterSnapshot(t, 1, 3), clusterSnapshot(t, 4, 3)
	mismatch(a.apply(ctx, deltaPush(t, v1, v2, v2.GetVersion()))) // no base yet
	if len(eng.applied) != 0 {
		t.Fatal("a delta without a base reached the engine")
	}
	ack(a.apply(ctx, fullPush(t, v1)), v1)
	ack(a.apply(ctx, deltaPush(t, v1, v2, v2.GetVersion())), v2)

	applied := len(eng.applied)
	mismatch(a.apply(ctx, deltaPush(t, v2, v3, v1.GetVersion()))) // rebuilds v3, claims v1
	if len(eng.applied) != applied {
		t.Fatal("a delta that sealed to another version reached the engine")
	}
	mismatch(a.apply(ctx, deltaPush(t, v2, v3, v3.GetVersion()))) // the base was dropped
	ack(a.apply(ctx, fullPush(t, v3)), v3)
	mismatch(a.apply(ctx, deltaPush(t, v1, v2, v2.GetVersion()))) // against another base
	ack(a.apply(ctx, fullPush(t, v3)), v3)
	a.primeSealer()
	ack(a.apply(ctx, deltaPush(t, v3, v1, v1.GetVersion())), v1)

	// A full snapshot whose content does not hash to the version it carries is applied as
	// before (the engine checks only that the versions agree), but priming the sealer finds it
	// out and drops it as a base: the next delta asks for the snapshot in full.
	liar := proto.Clone(v2).(*irv1.Snapshot)
	liar.Version = v3.GetVersion()
	ack(a.apply(ctx, fullPush(t, liar)), liar)
	a.primeSealer()
	mismatch(a.apply(ctx, deltaPush(t, v3, v1, v1.GetVersion())))
}
