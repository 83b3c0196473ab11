package irv1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The version of a snapshot is a hash tree over its parts, so that a snapshot that differs from
// the previous one in one route is resealed by hashing that route, its virtual host and the few
// messages above it, reusing the hashes of every other part (Sealer). Hashing the whole
// snapshot's encoding, as the version was defined before, cost ~1.4 MB of encoding and SHA-256
// per change at 5,000 routes, on the controller and on every proxy rebuilding a delta.
//
// The hash of a message m, H(m):
//   - a leaf part (Route, Cluster, Secret): SHA-256 of m's deterministic encoding;
//   - a node (Snapshot, Listener, Server, VirtualHost): SHA-256 of
//     uvarint(len(head)) ‖ head ‖ for each element e of each part field, in field-number order:
//     uvarint(field number) ‖ H(e)
//     where head is the deterministic encoding of m without its part fields (unknown fields
//     included, so what a newer peer adds is hashed too).
//
// The part fields are Snapshot's listeners, clusters and secrets, Listener's servers, Server's
// virtual hosts and VirtualHost's routes: what one change replaces. Everything else (a Gateway
// generation, an ACME challenge, a server's TLS) is in its parent's head. The version is the hex
// of H(snapshot)'s first 16 bytes, with the version field cleared.
//
// Seal is the definition written plainly (by reflection, nothing remembered); the Sealer is the
// fast one, held to it by TestSealerEqualsSeal here, in controller/translator and in
// core/discovery/delta.

// partFields are the fields of each node type whose elements are hashed apart, in field-number
// order.
var partFields = map[protoreflect.FullName][]protoreflect.Name{
	"coxswain.ir.v1.Snapshot":    {"listeners", "clusters", "secrets"},
	"coxswain.ir.v1.Listener":    {"servers"},
	"coxswain.ir.v1.Server":      {"virtual_hosts"},
	"coxswain.ir.v1.VirtualHost": {"routes"},
}

// Seal sets s.Version to the content hash of s described above. Callers must have sorted every
// repeated field (see ir.proto) first; then an unchanged input always yields the same version.
// It fails only if a string holds invalid UTF-8.
func Seal(s *Snapshot) error {
	s.Version = ""
	sum, err := plainHash(s.ProtoReflect())
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	s.Version = hex.EncodeToString(sum[:16])
	return nil
}

// plainHash is H(m), by reflection.
func plainHash(m protoreflect.Message) ([sha256.Size]byte, error) {
	d := m.Descriptor()
	parts, node := partFields[d.FullName()]
	if !node {
		b, err := deterministic.Marshal(m.Interface())
		return sha256.Sum256(b), err
	}
	head := m.New()
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if !isPart(parts, fd) {
			head.Set(fd, v)
		}
		return true
	})
	head.SetUnknown(m.GetUnknown())
	hb, err := deterministic.Marshal(head.Interface())
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	b := protowire.AppendVarint(nil, uint64(len(hb)))
	b = append(b, hb...)
	for _, name := range parts {
		fd := d.Fields().ByName(name)
		l := m.Get(fd).List()
		for i := range l.Len() {
			sum, err := plainHash(l.Get(i).Message())
			if err != nil {
				return [sha256.Size]byte{}, err
			}
			b = protowire.AppendVarint(b, uint64(fd.Number()))
			b = append(b, sum[:]...)
		}
	}
	return sha256.Sum256(b), nil
}

func isPart(parts []protoreflect.Name, fd protoreflect.FieldDescriptor) bool {
	for _, p := range parts {
		if fd.Name() == p {
			return true
		}
	}
	return false
}

var deterministic = proto.MarshalOptions{Deterministic: true}
