package irv1

import (
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
//     uvarint(len(head)) ‖ head ‖ for each run of each part field, in field-number order:
//     uvarint(field number) ‖ H(run)
//     where head is the deterministic encoding of m without its part fields (unknown fields
//     included, so what a newer peer adds is hashed too);
//   - a run: a field's elements are cut into runs, each ending after an element e whose
//     H(e)[0] < runCut (one in 64), or at the field's last element; H(run) is SHA-256 of the
//     concatenated hashes of its elements.
//
// The part fields are Snapshot's listeners, clusters and secrets, Listener's servers, Server's
// virtual hosts and VirtualHost's routes: what one change replaces. Everything else (a Gateway
// generation, an ACME challenge, a server's TLS) is in its parent's head. The version is the hex
// of H(snapshot)'s first 16 bytes, with the version field cleared.
//
// Runs (session 16): where a cut falls depends on the content of the element before it only, so
// a changed, added or removed element changes its own run (and, when it moves a cut, its
// neighbour's) and no other; a server of 10,000 virtual hosts is ~160 runs, and resealing it
// after a one-route change hashes one run of ~64 hashes and ~160 run records, where one record
// per virtual host (330 KB at 10,000) was hashed before. A run whose elements are the very
// messages of a run of the previous seal is taken whole (Sealer). Worst case (elements made so
// that none ends a run: the cut is a hash a tenant can search for) is one run, which costs what
// one record per element cost before.

// Seal is a Sealer that remembers nothing; TestSealerEqualsSeal (here, in controller/translator
// and in core/discovery/delta) holds the Sealer to it, and TestVersionIsTheHashTree both to this
// definition, written out plainly in the test (referenceSeal).

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
	one := Sealer{oneShot: true}
	return one.Seal(s)
}

// runCut: an element whose hash's first byte is below it ends a run (one in 64).
const runCut = 4

// endsRun reports whether an element of hash sum ends its run.
func endsRun(sum *[32]byte) bool { return sum[0] < runCut }

func isPart(parts []protoreflect.Name, fd protoreflect.FieldDescriptor) bool {
	for _, p := range parts {
		if fd.Name() == p {
			return true
		}
	}
	return false
}

var deterministic = proto.MarshalOptions{Deterministic: true}
