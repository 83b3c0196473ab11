package irv1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Sealer seals snapshots exactly as Seal does (the same hash tree, version.go), without hashing
// again the parts it hashed for the snapshot it sealed before. Two users make snapshots that
// share most of their parts with the previous one: the controller's incremental translator
// (replayed routes, clusters whose endpoints did not change, virtual hosts no change touched) and
// the proxy's discovery agent (a snapshot rebuilt from a delta shares every unchanged virtual
// host, cluster and secret with its base). Resealing then costs the changed parts, their runs,
// the heads of the listeners and servers above them and one 33-byte record per run of a
// changed list: at 10,000 virtual hosts a server is ~160 runs, and a run of unchanged virtual
// hosts is taken whole after a comparison of its pointers with the previous seal's.
//
// It remembers the runs of the lists of the nodes hashed at every seal (the snapshot's
// clusters and secrets, each server's virtual hosts) as the previous seal's lists of runs
// (prev), each run with its messages' addresses and hashes, and the rest (a changed virtual
// host's routes, parts found out of place) by message address in a map. So a remembered message
// must not change after it was sealed: snapshots are immutable once sealed, and both users build
// new messages for what changed. A Sealer is not safe for concurrent use.
type Sealer struct {
	// SkipRoutes leaves routes out of what is remembered (their virtual host's hash still covers
	// them): for a user whose changed virtual hosts never share routes with the previous
	// snapshot, as the agent's (a changed virtual host arrives decoded whole). The translator's
	// replayed routes need them remembered.
	SkipRoutes bool

	// oneShot remembers nothing: Seal's, for a snapshot sealed once.
	oneShot bool

	// hashed are the remembered hashes, by message address (a pointer hashes faster than an
	// interface, and keeps the message referenced alike, so no new message can take its
	// address), with the seal that last used each.
	hashed map[unsafe.Pointer]*partHash
	seals  uint64
	used   int // hashes the latest seal used
	// computed counts the messages the latest seal hashed, remembered or not, and runs the runs
	// it hashed (tests).
	computed, runs int
	// bufs are the hash inputs being assembled, one per depth of the tree (snapshot, listener,
	// server, virtual host, leaf), and runBufs the runs being assembled, reused by the next seal.
	bufs, runBufs [5][]byte
	// prev and cur are the runs of each part field of the nodes hashed at every seal (the
	// snapshot, its listeners and servers), in the order visited: the previous seal's and this
	// one's (nil for the fields of listeners and servers, which are hashed every time). A field is
	// matched with the previous seal's at the same place (runs.go).
	prev, cur [][]*run
}

type partHash struct {
	sum  [sha256.Size]byte
	seal uint64
}

// Seal sets snap.Version to what Seal(snap) would.
func (s *Sealer) Seal(snap *Snapshot) error {
	snap.Version = ""
	if s.hashed == nil {
		s.hashed = map[unsafe.Pointer]*partHash{}
	}
	s.seals++
	s.used, s.computed, s.runs = 0, 0, 0
	s.cur = s.cur[:0]
	sum, err := s.hash(snap.ProtoReflect(), 0)
	s.prev, s.cur = s.cur, s.prev
	if err != nil {
		s.prev = nil // its lists may be incomplete
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	if len(s.hashed) > 2*s.used+1024 {
		// Forget the parts of older snapshots once they are most of what is remembered.
		for k, e := range s.hashed {
			if e.seal != s.seals {
				delete(s.hashed, k)
			}
		}
	}
	snap.Version = hex.EncodeToString(sum[:16])
	return nil
}

// Forget drops every remembered hash and the buffers: for a user whose next snapshot shares
// nothing with the previous one (a proxy sent a full snapshot), so they are not kept alive.
func (s *Sealer) Forget() { *s = Sealer{SkipRoutes: s.SkipRoutes, oneShot: s.oneShot} }

// remembers says whether the hashes of a message type are kept for the next seal: the parts
// the users share between consecutive snapshots.
func (s *Sealer) remembers(d protoreflect.MessageDescriptor) bool {
	if s.oneShot {
		return false
	}
	switch d.FullName() {
	case "coxswain.ir.v1.Cluster", "coxswain.ir.v1.VirtualHost", "coxswain.ir.v1.Secret":
		return true
	case "coxswain.ir.v1.Route":
		return !s.SkipRoutes
	}
	return false
}

// hash is H(m) (version.go), from memory when m was hashed before. depth picks the buffer.
func (s *Sealer) hash(m protoreflect.Message, depth int) ([sha256.Size]byte, error) {
	if !s.remembers(m.Descriptor()) {
		return s.compute(m, depth)
	}
	key := messageAddress(m)
	e := s.hashed[key]
	if e == nil {
		sum, err := s.compute(m, depth)
		if err != nil {
			return sum, err
		}
		e = &partHash{sum: sum}
		s.hashed[key] = e
	}
	if e.seal != s.seals {
		e.seal = s.seals
		s.used++
	}
	return e.sum, nil
}

// compute hashes m: a leaf's encoding, or a node's head and its parts' hashes.
func (s *Sealer) compute(m protoreflect.Message, depth int) ([sha256.Size]byte, error) {
	var none [sha256.Size]byte
	s.computed++
	d := m.Descriptor()
	order, node := nodeFields[d.FullName()]
	b := s.bufs[depth][:0]
	defer func() { s.bufs[depth] = b[:0] }()
	var err error
	if !node {
		if b, err = deterministic.MarshalAppend(b, m.Interface()); err != nil {
			return none, err
		}
		return sha256.Sum256(b), nil
	}
	// The head, after room for its length (one byte for a head under 128 bytes, as a virtual
	// host's is: then nothing moves).
	b = append(b, 0)
	if b, err = s.appendHead(b, m, order); err != nil {
		return none, err
	}
	if n := len(b) - 1; n < 0x80 {
		b[0] = byte(n)
	} else {
		size := protowire.SizeVarint(uint64(n))
		b = slices.Grow(b, size-1)[:len(b)+size-1]
		copy(b[size:], b[1:1+n])
		protowire.AppendVarint(b[:0], uint64(n))
	}
	if s.oneShot || s.remembers(d) {
		// A remembered node (a virtual host) is hashed when it is new: its children (routes)
		// are looked up one by one. A one-shot seal hashes every node so.
		for _, fd := range order {
			if !fd.part {
				continue
			}
			if b, err = s.appendRunsOf(b, m, fd.fd, depth+1); err != nil {
				return none, err
			}
		}
		return sha256.Sum256(b), nil
	}
	// A node hashed at every seal: the runs of its remembered children come from the previous
	// seal's runs of the same field where they are the same messages.
	for _, fd := range order {
		if !fd.part {
			continue
		}
		k := len(s.cur)
		s.cur = append(s.cur, nil)
		var prev []*run
		if k < len(s.prev) {
			prev = s.prev[k]
		}
		var runs []*run
		if b, runs, err = s.appendField(b, m, fd.fd, prev, depth+1); err != nil {
			return none, err
		}
		s.cur[k] = runs
	}
	return sha256.Sum256(b), nil
}

// appendHead appends the deterministic encoding of m without its part fields, field by field in
// field-number order as the protobuf library encodes them.
func (s *Sealer) appendHead(b []byte, m protoreflect.Message, order []nodeField) ([]byte, error) {
	if len(m.GetUnknown()) > 0 {
		// Unknown fields (a newer controller's): the library places them; rare enough to copy.
		head := m.New()
		for _, f := range order {
			if !f.part && m.Has(f.fd) {
				head.Set(f.fd, m.Get(f.fd))
			}
		}
		head.SetUnknown(m.GetUnknown())
		return deterministic.MarshalAppend(b, head.Interface())
	}
	for _, f := range order {
		fd := f.fd
		if f.part || !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		switch {
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			l := v.List()
			for i := range l.Len() {
				b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
				b = protowire.AppendString(b, l.Get(i).String())
			}
		case fd.IsList() || fd.IsMap() || fd.ContainingOneof() != nil || fd.Kind() == protoreflect.MessageKind:
			var err error
			if b, err = appendField(b, m, fd); err != nil {
				return nil, err
			}
		case fd.Kind() == protoreflect.StringKind:
			b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
			b = protowire.AppendString(b, v.String())
		case fd.Kind() == protoreflect.Uint32Kind || fd.Kind() == protoreflect.Uint64Kind:
			b = protowire.AppendTag(b, fd.Number(), protowire.VarintType)
			b = protowire.AppendVarint(b, v.Uint())
		case fd.Kind() == protoreflect.BoolKind:
			b = protowire.AppendTag(b, fd.Number(), protowire.VarintType)
			b = protowire.AppendVarint(b, protowire.EncodeBool(v.Bool()))
		default:
			var err error
			if b, err = appendField(b, m, fd); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// messageAddress is the address of the generated message m reflects.
func messageAddress(m protoreflect.Message) unsafe.Pointer {
	i := m.Interface()
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&i))[1]
}

// appendField appends one field as the protobuf library encodes it, from a message holding that
// field alone: for sub-messages of a head (a server's TLS, a snapshot's Gateway generations) and
// kinds the heads have none of today (a new field of any kind still encodes right).
func appendField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor) ([]byte, error) {
	one := m.New()
	one.Set(fd, m.Get(fd))
	return deterministic.MarshalAppend(b, one.Interface())
}

// nodeField is a field of a node type, and whether its elements are hashed apart.
type nodeField struct {
	fd   protoreflect.FieldDescriptor
	part bool
}

// nodeFields is each node type's fields in field-number order, the order of the library's
// encoding. It is filled at init, so concurrent sealers only read it.
var nodeFields = map[protoreflect.FullName][]nodeField{}

func init() {
	for _, m := range []proto.Message{&Snapshot{}, &Listener{}, &Server{}, &VirtualHost{}} {
		d := m.ProtoReflect().Descriptor()
		fs := make([]nodeField, 0, d.Fields().Len())
		for i := range d.Fields().Len() {
			fd := d.Fields().Get(i)
			fs = append(fs, nodeField{fd: fd, part: isPart(partFields[d.FullName()], fd)})
		}
		slices.SortFunc(fs, func(a, b nodeField) int { return int(a.fd.Number()) - int(b.fd.Number()) })
		nodeFields[d.FullName()] = fs
	}
}
