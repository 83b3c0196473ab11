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
// host, cluster and secret with its base). Resealing then costs the changed parts, the heads of
// the listeners and servers above them, and one 33-byte record per virtual host of a changed
// server: at 5,000 routes ~170 KB hashed instead of the 1.4 MB snapshot encoded and hashed.
//
// It remembers the hashes of routes, clusters, secrets and virtual hosts by message address: the
// children of the nodes hashed at every seal (the snapshot, its listeners and servers, a few
// per snapshot) as the previous seal's lists (prev), the rest (a changed virtual host's routes)
// in a map. So a remembered message must not change after it was sealed: snapshots are
// immutable once sealed, and both users build new messages for what changed. A Sealer is not
// safe for concurrent use.
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
	// computed counts the messages the latest seal hashed, remembered or not (tests).
	computed int
	// bufs are the hash inputs being assembled, one per depth of the tree (snapshot, listener,
	// server, virtual host, leaf), reused by the next seal.
	bufs [5][]byte
	// prev and cur are the children of the nodes that are hashed at every seal (the snapshot,
	// its listeners and servers), in the order they were visited, with their hashes: the
	// previous seal's and this one's. A node's children are looked for in the previous seal's
	// list at the same place first (children), which finds a server's 5,000 unchanged virtual
	// hosts by comparing pointers in two arrays; a map lookup each, scattered over the heap,
	// cost as much as hashing the whole encoding had.
	prev, cur []children
}

// children are the remembered children of one node, in order, and their hashes.
type children struct {
	msgs []unsafe.Pointer
	sums [][sha256.Size]byte
}

// lookAhead is how far past the expected place a child is looked for in the previous list:
// children removed in front of it shift it by that many.
const lookAhead = 8

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
	s.used, s.computed = 0, 0
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
			l := m.Get(fd.fd).List()
			for i := range l.Len() {
				sum, err := s.hash(l.Get(i).Message(), depth+1)
				if err != nil {
					return none, err
				}
				b = protowire.AppendVarint(b, uint64(fd.fd.Number()))
				b = append(b, sum[:]...)
			}
		}
		return sha256.Sum256(b), nil
	}
	// A node hashed at every seal: its remembered children come from its list of the previous
	// seal where they are the same messages in the same places.
	k := len(s.cur)
	var msgs []unsafe.Pointer
	var sums [][sha256.Size]byte
	if k < cap(s.cur) {
		// The arrays this slot had two seals ago (the previous seal's are prev's).
		old := s.cur[:k+1][k]
		msgs, sums = old.msgs[:0], old.sums[:0]
	}
	s.cur = append(s.cur, children{})
	var prev *children
	if k < len(s.prev) {
		prev = &s.prev[k]
	}
	a := aligner{s: s, prev: prev, msgs: msgs, sums: sums, depth: depth + 1}
	for _, fd := range order {
		if !fd.part {
			continue
		}
		var err error
		if b, err = a.appendField(b, m, fd.fd); err != nil {
			return none, err
		}
	}
	msgs, sums = a.msgs, a.sums
	s.cur[k] = children{msgs: msgs, sums: sums}
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

// aligner hashes the children of a node hashed at every seal, taking the hashes of remembered
// children from the node's list of the previous seal (prev) where they are the same messages.
type aligner struct {
	s      *Sealer
	prev   *children
	next   int // where the next child likely is in prev
	misses int
	index  map[unsafe.Pointer]int // prev's children, made after lookAhead misses
	msgs   []unsafe.Pointer
	sums   [][sha256.Size]byte
	depth  int
}

// appendField appends the records of one part field's elements. The fields that hold thousands
// of messages are read as the generated slices they are: reflection's message wrapping, to get
// each one's address, cost more than the rest of a reseal.
func (a *aligner) appendField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor) ([]byte, error) {
	num := uint64(fd.Number())
	if a.s.remembers(fd.Message()) {
		switch x := m.Interface().(type) {
		case *Server:
			if fd.Name() == "virtual_hosts" {
				return appendRemembered(a, b, num, x.VirtualHosts)
			}
		case *Snapshot:
			switch fd.Name() {
			case "clusters":
				return appendRemembered(a, b, num, x.Clusters)
			case "secrets":
				return appendRemembered(a, b, num, x.Secrets)
			}
		}
	}
	l := m.Get(fd).List()
	remembered := a.s.remembers(fd.Message())
	for i := range l.Len() {
		c := l.Get(i).Message()
		var sum [sha256.Size]byte
		var err error
		if remembered {
			sum, err = a.child(messageAddress(c), c)
		} else {
			sum, err = a.s.compute(c, a.depth)
		}
		if err != nil {
			return nil, err
		}
		b = protowire.AppendVarint(b, num)
		b = append(b, sum[:]...)
	}
	return b, nil
}

// appendRemembered is appendField for a generated slice of remembered messages.
func appendRemembered[E any, P interface {
	*E
	proto.Message
}](a *aligner, b []byte, num uint64, list []P) ([]byte, error) {
	for _, c := range list {
		key := unsafe.Pointer(c)
		sum, ok := a.fromPrev(key)
		if !ok {
			var err error
			if sum, err = a.s.hash(c.ProtoReflect(), a.depth); err != nil {
				return nil, err
			}
		}
		a.msgs, a.sums = append(a.msgs, key), append(a.sums, sum)
		b = protowire.AppendVarint(b, num)
		b = append(b, sum[:]...)
	}
	return b, nil
}

// child returns the hash of a remembered child and lists it.
func (a *aligner) child(key unsafe.Pointer, c protoreflect.Message) ([sha256.Size]byte, error) {
	sum, ok := a.fromPrev(key)
	if !ok {
		var err error
		if sum, err = a.s.hash(c, a.depth); err != nil {
			return sum, err
		}
	}
	a.msgs, a.sums = append(a.msgs, key), append(a.sums, sum)
	return sum, nil
}

// fromPrev finds key in the previous seal's list: at or a little after the expected place,
// else further on (children removed in front of it) for the first few misses, which are mostly
// new children a scan of pointers does not find, and then by an index of the list (reordered).
func (a *aligner) fromPrev(key unsafe.Pointer) ([sha256.Size]byte, bool) {
	var none [sha256.Size]byte
	if a.prev == nil {
		return none, false
	}
	msgs := a.prev.msgs
	for j := a.next; j < min(len(msgs), a.next+lookAhead); j++ {
		if msgs[j] == key {
			a.next = j + 1
			return a.prev.sums[j], true
		}
	}
	if a.index == nil && a.misses < lookAhead {
		a.misses++
		for j := a.next + lookAhead; j < len(msgs); j++ {
			if msgs[j] == key {
				a.next = j + 1
				return a.prev.sums[j], true
			}
		}
		return none, false
	}
	if a.index == nil {
		a.index = make(map[unsafe.Pointer]int, len(msgs))
		for j, m := range msgs {
			a.index[m] = j
		}
	}
	if j, ok := a.index[key]; ok {
		a.next = j + 1
		return a.prev.sums[j], true
	}
	return none, false
}
