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

// Sealer seals snapshots exactly as Seal does (the same bytes hashed, so the same Version),
// without encoding again the messages it encoded for the snapshot it sealed before. Two users
// make snapshots that share most of their messages with the previous one: the controller's
// incremental translator (replayed routes, clusters whose endpoints did not change, virtual hosts
// no change touched) and the proxy's discovery agent (a snapshot rebuilt from a delta shares every
// unchanged virtual host, cluster and secret with its base). At thousands of routes encoding
// those is most of sealing: resealing then costs the envelope, the changed parts and the hash.
//
// It encodes the envelope itself (Snapshot, Listener, Server, VirtualHost, field by field in
// field-number order, as the protobuf library's deterministic encoding does) and every Route,
// Cluster and Secret with proto.Marshal, once per message; it remembers the encodings of those and
// of virtual hosts by message address. So a remembered message must not change after it was
// sealed: snapshots are immutable once sealed, and both users build new messages for what
// changed. TestSealerEqualsSeal (here, in controller/translator and core/discovery/delta) holds
// it to Seal. A Sealer is not safe for concurrent use.
type Sealer struct {
	// SkipRoutes leaves Route encodings out of what is remembered (a virtual host's still
	// includes them): for a user whose changed virtual hosts never share routes with the
	// previous snapshot, as the agent's (a changed virtual host arrives decoded whole). It halves
	// what such a user keeps; the translator's replayed routes need them remembered.
	SkipRoutes bool

	// encoded are the remembered encodings, by message address (a pointer hashes faster than an
	// interface, and keeps the message referenced alike, so no new message can take its
	// address), with the seal that last used each.
	encoded map[unsafe.Pointer]*encoding
	seals   uint64
	used    int    // encodings the latest seal used
	buf     []byte // the latest snapshot's encoding
}

type encoding struct {
	b    []byte
	seal uint64
}

// Seal sets snap.Version to what Seal(snap) would.
func (s *Sealer) Seal(snap *Snapshot) error {
	snap.Version = ""
	if s.encoded == nil {
		s.encoded = map[unsafe.Pointer]*encoding{}
	}
	s.seals++
	s.used = 0
	b, err := s.appendMessage(s.buf[:0], snap.ProtoReflect())
	if err != nil {
		return fmt.Errorf("encoding snapshot: %w", err)
	}
	s.buf = b // the next seal encodes into the same memory
	if len(s.encoded) > 2*s.used+1024 {
		// Forget the messages of older snapshots once they are most of what is remembered.
		for k, e := range s.encoded {
			if e.seal != s.seals {
				delete(s.encoded, k)
			}
		}
	}
	sum := sha256.Sum256(b)
	snap.Version = hex.EncodeToString(sum[:16])
	return nil
}

// Forget drops every remembered encoding and the buffer: for a user whose next snapshot shares
// nothing with the previous one (a proxy sent a full snapshot), so they are not kept alive.
func (s *Sealer) Forget() { s.encoded, s.buf = nil, nil }

// remembers says whether the encodings of a message type are kept for the next seal: the
// messages the users share between consecutive snapshots.
func (s *Sealer) remembers(d protoreflect.MessageDescriptor) bool {
	switch d.FullName() {
	case "coxswain.ir.v1.Cluster", "coxswain.ir.v1.VirtualHost", "coxswain.ir.v1.Secret":
		return true
	case "coxswain.ir.v1.Route":
		return !s.SkipRoutes
	}
	return false
}

// envelope are the message types encoded field by field.
func envelope(d protoreflect.MessageDescriptor) bool {
	switch d.FullName() {
	case "coxswain.ir.v1.Snapshot", "coxswain.ir.v1.Listener", "coxswain.ir.v1.Server", "coxswain.ir.v1.VirtualHost":
		return true
	}
	return false
}

var deterministic = proto.MarshalOptions{Deterministic: true}

// appendMessage appends m's encoding (without tag or length).
func (s *Sealer) appendMessage(b []byte, m protoreflect.Message) ([]byte, error) {
	if !s.remembers(m.Descriptor()) {
		return s.encode(b, m)
	}
	e, err := s.encodingOf(m)
	if err != nil {
		return nil, err
	}
	return append(b, e.b...), nil
}

// encodingOf returns the remembered encoding of m, encoding it if it has none.
func (s *Sealer) encodingOf(m protoreflect.Message) (*encoding, error) {
	key := messageAddress(m)
	e := s.encoded[key]
	if e == nil {
		enc, err := s.encode(nil, m)
		if err != nil {
			return nil, err
		}
		e = &encoding{b: enc}
		s.encoded[key] = e
	}
	if e.seal != s.seals {
		e.seal = s.seals
		s.used++
	}
	return e, nil
}

// messageAddress is the address of the generated message m reflects.
func messageAddress(m protoreflect.Message) unsafe.Pointer {
	i := m.Interface()
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&i))[1]
}

// encode appends m's encoding: an envelope field by field, anything else by the library.
func (s *Sealer) encode(b []byte, m protoreflect.Message) ([]byte, error) {
	d := m.Descriptor()
	if !envelope(d) || len(m.GetUnknown()) > 0 {
		return deterministic.MarshalAppend(b, m.Interface())
	}
	for _, fd := range fieldOrder[d.FullName()] {
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		var err error
		switch {
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := v.List()
			for i := range l.Len() {
				if b, err = s.appendSub(b, fd.Number(), l.Get(i).Message()); err != nil {
					return nil, err
				}
			}
		case fd.IsList() && fd.Kind() == protoreflect.StringKind:
			l := v.List()
			for i := range l.Len() {
				b = protowire.AppendTag(b, fd.Number(), protowire.BytesType)
				b = protowire.AppendString(b, l.Get(i).String())
			}
		case fd.IsList() || fd.IsMap() || fd.ContainingOneof() != nil:
			b, err = appendField(b, m, fd)
		case fd.Kind() == protoreflect.MessageKind:
			b, err = s.appendSub(b, fd.Number(), v.Message())
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
			b, err = appendField(b, m, fd)
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// appendSub appends a length-delimited sub-message field.
func (s *Sealer) appendSub(b []byte, num protoreflect.FieldNumber, m protoreflect.Message) ([]byte, error) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	if s.remembers(m.Descriptor()) { // its length is known before it is appended
		e, err := s.encodingOf(m)
		if err != nil {
			return nil, err
		}
		b = protowire.AppendVarint(b, uint64(len(e.b)))
		return append(b, e.b...), nil
	}
	// Encode after room for the length, then write the length: its own size is known only once
	// the message is encoded. The room is that of the previous snapshot's whole length, which
	// the big envelope messages (a listener, a server of thousands of virtual hosts) need too:
	// they then stay where they are, and only smaller ones move (copying 1.4 MB twice per seal
	// at 5,000 routes was a twentieth of a translation).
	room := protowire.SizeVarint(uint64(len(s.buf)))
	at := len(b)
	b = slices.Grow(b, room)[:at+room]
	b, err := s.appendMessage(b, m)
	if err != nil {
		return nil, err
	}
	n := len(b) - at - room
	size := protowire.SizeVarint(uint64(n))
	if size != room {
		if size > room {
			b = slices.Grow(b, size-room)
		}
		b = b[:at+size+n]
		copy(b[at+size:], b[at+room:at+room+n])
	}
	protowire.AppendVarint(b[:at], uint64(n))
	return b, nil
}

// appendField appends one field as the protobuf library encodes it, from a message holding that
// field alone: for the kinds the envelope has none of today (a new field of any kind still
// encodes right).
func appendField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor) ([]byte, error) {
	one := m.New()
	one.Set(fd, m.Get(fd))
	return deterministic.MarshalAppend(b, one.Interface())
}

// fieldOrder is each envelope type's fields in field-number order, the order of the library's
// encoding. It is filled at init, so concurrent sealers only read it.
var fieldOrder = map[protoreflect.FullName][]protoreflect.FieldDescriptor{}

func init() {
	for _, m := range []proto.Message{&Snapshot{}, &Listener{}, &Server{}, &VirtualHost{}} {
		d := m.ProtoReflect().Descriptor()
		fs := make([]protoreflect.FieldDescriptor, 0, d.Fields().Len())
		for i := range d.Fields().Len() {
			fs = append(fs, d.Fields().Get(i))
		}
		slices.SortFunc(fs, func(a, b protoreflect.FieldDescriptor) int { return int(a.Number()) - int(b.Number()) })
		fieldOrder[d.FullName()] = fs
	}
}
