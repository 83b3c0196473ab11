package translator

import (
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// sealer seals an Incremental's snapshots with irv1.Sealer: they share the routes and clusters
// of replayed builds and the virtual hosts no change touched with the previous snapshot, whose
// hashes it remembers. TestSealerEqualsSeal and the property test hold it to irv1.Seal.
type sealer struct{ irv1.Sealer }

func (s *sealer) seal(snap *irv1.Snapshot) error { return s.Seal(snap) }
