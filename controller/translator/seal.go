package translator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// sealer seals snapshots exactly as irv1.Seal does (the same bytes hashed, so the same
// Version), without encoding again the routes and clusters it encoded for the previous
// snapshot: an Incremental's snapshots share those messages (the replayed builds' routes,
// clusters whose endpoints did not change), and at thousands of routes encoding them is most of
// sealing.
//
// It encodes the snapshot's envelope itself (Snapshot, Listener, Server, VirtualHost, field by
// field in field-number order, as the protobuf library's deterministic encoding does) and every
// Route and Cluster with proto.Marshal, once per message. TestSealerEqualsSeal and the property
// test hold it to irv1.Seal.
type sealer struct {
	// encoded are the encodings of routes, clusters and virtual hosts, by message address (a
	// pointer hashes faster than an interface, and keeps the message referenced alike), with
	// the seal that last used each.
	encoded map[unsafe.Pointer]*encoding
	seals   uint64
	used    int    // encodings the latest seal used
	buf     []byte // the latest snapshot's encoding
}

type encoding struct {
	b    []byte
	seal uint64
}

func (s *sealer) seal(snap *irv1.Snapshot) error {
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

// remembered says whether the encodings of a message type are kept for the next seal: the
// messages a replay shares with the previous snapshot.
func remembered(d protoreflect.MessageDescriptor) bool {
	switch d.FullName() {
	case "coxswain.ir.v1.Route", "coxswain.ir.v1.Cluster", "coxswain.ir.v1.VirtualHost":
		return true
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
func (s *sealer) appendMessage(b []byte, m protoreflect.Message) ([]byte, error) {
	if !remembered(m.Descriptor()) {
		return s.encode(b, m)
	}
	e, err := s.encodingOf(m)
	if err != nil {
		return nil, err
	}
	return append(b, e.b...), nil
}

// encodingOf returns the remembered encoding of m, encoding it if it has none.
func (s *sealer) encodingOf(m protoreflect.Message) (*encoding, error) {
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
func (s *sealer) encode(b []byte, m protoreflect.Message) ([]byte, error) {
	d := m.Descriptor()
	if !envelope(d) {
		return deterministic.MarshalAppend(b, m.Interface())
	}
	if len(m.GetUnknown()) > 0 {
		return deterministic.MarshalAppend(b, m.Interface())
	}
	for _, fd := range fieldsByNumber(d) {
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
func (s *sealer) appendSub(b []byte, num protoreflect.FieldNumber, m protoreflect.Message) ([]byte, error) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	if remembered(m.Descriptor()) { // its length is known before it is appended
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

var fieldOrder = map[protoreflect.FullName][]protoreflect.FieldDescriptor{}

// fieldsByNumber is d's fields in field-number order, the order of the library's encoding. Only
// envelope types are asked for, from one goroutine at a time per sealer; the map is filled at
// init so concurrent sealers only read it.
func fieldsByNumber(d protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	return fieldOrder[d.FullName()]
}

func init() {
	for _, m := range []proto.Message{&irv1.Snapshot{}, &irv1.Listener{}, &irv1.Server{}, &irv1.VirtualHost{}} {
		d := m.ProtoReflect().Descriptor()
		fs := make([]protoreflect.FieldDescriptor, 0, d.Fields().Len())
		for i := range d.Fields().Len() {
			fs = append(fs, d.Fields().Get(i))
		}
		slices.SortFunc(fs, func(a, b protoreflect.FieldDescriptor) int { return int(a.Number()) - int(b.Number()) })
		fieldOrder[d.FullName()] = fs
	}
}
