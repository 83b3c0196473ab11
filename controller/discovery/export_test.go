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
