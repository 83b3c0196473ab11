package delta

import (
	"testing"

	"google.golang.org/protobuf/proto"

	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// FuzzApplyDelta: whatever bytes arrive as a delta (the agent decodes them after the mTLS
// stream, so only a faulty or hostile controller could send them), decoding and applying them to
// the proxy's base never panics and never changes the base; a result that Apply accepts reseals
// without error, so the agent's version check decides, never a crash. The seeds are real deltas
// between random snapshots, so the fuzzer starts from well-formed changes of every kind.
func FuzzApplyDelta(f *testing.F) {
	w := newWorld(11)
	base := w.snapshot(f)
	baseBytes, err := deterministic.Marshal(base)
	if err != nil {
		f.Fatal(err)
	}
	for range 12 {
		for range 1 + w.r.IntN(3) {
			w.step()
		}
		next := w.snapshot(f)
		d, err := Diff(base, next)
		if err != nil {
			f.Fatal(err)
		}
		b, err := proto.Marshal(d)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &discv1.Delta{}
		if err := proto.Unmarshal(data, d); err != nil {
			return // the agent stops here too: "decoding the delta"
		}
		if d.GetBaseVersion() == "" {
			d.BaseVersion = base.GetVersion() // let the fuzzer past the base check more often
		}
		next, err := Apply(base, d, "fuzz")
		if after, _ := deterministic.Marshal(base); string(after) != string(baseBytes) {
			t.Fatal("Apply changed the base")
		}
		if err != nil {
			return
		}
		var s irv1.Sealer
		_ = s.Seal(next) // may refuse (e.g. a listener without a name), must not panic
	})
}
