package irv1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// Seal sets s.Version to the content hash of s: the hex SHA-256 of its deterministic encoding with
// the version cleared. Callers must have sorted every repeated field (see ir.proto) first; then an
// unchanged input always yields the same version. It fails only if a string holds invalid UTF-8.
func Seal(s *Snapshot) error {
	s.Version = ""
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	sum := sha256.Sum256(b)
	s.Version = hex.EncodeToString(sum[:16])
	return nil
}
