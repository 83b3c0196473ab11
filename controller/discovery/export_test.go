package discovery

import irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"

// DiscoveryTailor exposes tailor to the benchmarks of package discovery_test.
func DiscoveryTailor(snap *irv1.Snapshot, ns, name string) (*irv1.Snapshot, error) {
	return tailor(snap, &gwKey{ns, name}, nil)
}

// DeltaLarger exposes prepared.larger (is snap's full encoding larger than n bytes?) to the
// benchmarks.
func DeltaLarger(snap *irv1.Snapshot, n int) bool {
	return (&prepared{snap: snap}).larger(n)
}

// Cutter is what a term does with each published snapshot for one dedicated proxy's Gateway:
// the hand-over's look at it (the facts kept across publications) and the Gateway's tailoring,
// kept likewise. For the benchmarks.
type Cutter struct {
	cat catalog
	tl  tailoring
	gw  gwKey
}

func NewCutter(ns, name string) *Cutter { return &Cutter{gw: gwKey{ns, name}} }

// HandOver is Publish's look at snap: how many module IDs it names.
func (c *Cutter) HandOver(snap *irv1.Snapshot) int { return len(c.cat.update(snap).modules) }

// Tailor is the hand-over and the dedicated proxy's cut of snap.
func (c *Cutter) Tailor(snap *irv1.Snapshot) (*irv1.Snapshot, error) {
	return c.tl.tailor(snap, c.cat.update(snap), &c.gw, nil)
}

// PlainModulesOf and PlainTailor are the hand-over's walk and the dedicated tailoring as they
// were before session 16 (plain_test.go): the "before" of the benchmarks.
func PlainModulesOf(snap *irv1.Snapshot) int { return len(plainModulesOf(snap)) }

func PlainTailor(snap *irv1.Snapshot, ns, name string) (*irv1.Snapshot, error) {
	return plainTailor(snap, &gwKey{ns, name}, nil)
}
