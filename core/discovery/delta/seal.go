package delta

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Sealer computes irv1.Seal's version of a snapshot (the same bytes hashed) without encoding
// again the virtual hosts, clusters and secrets it encoded for the previous snapshot: a snapshot
// rebuilt by Apply shares every unchanged one with its base, so resealing it costs the envelope
// (snapshot, listeners, servers), the changed parts, and hashing the bytes — not the 7–10 ms of
// encoding 5,000 routes again.
//
// It encodes the envelope field by field in field-number order, as the protobuf library's
// deterministic encoding does, and every remembered message with proto.Marshal once.
// controller/translator's sealer does the same for the controller (remembering routes too);
// TestSealerEqualsSeal holds this one to irv1.Seal. Not safe for concurrent use.
type Sealer struct {
	encoded map[proto.Message]*encoding
	seals   uint64
	used    int
	buf     []byte
}

type encoding struct {
	b    []byte
	seal uint64
}

// Version is the version irv1.Seal would give snap; snap is not modified (its version field is
// left out of the encoding as Seal clears it).
func (s *Sealer) Version(snap *irv1.Snapshot) (string, error) {
	if s.encoded == nil {
		s.encoded = map[proto.Message]*encoding{}
	}
	s.seals++
	s.used = 0
	b, err := s.encode(s.buf[:0], snap.ProtoReflect())
	if err != nil {
		return "", fmt.Errorf("encoding snapshot: %w", err)
	}
	s.buf = b
	if len(s.encoded) > 2*s.used+1024 {
		for k, e := range s.encoded {
			if e.seal != s.seals {
				delete(s.encoded, k)
			}
		}
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

// Forget drops every remembered encoding (a proxy that gave up its base).
func (s *Sealer) Forget() { s.encoded, s.buf = nil, nil }

func remembered(d protoreflect.MessageDescriptor) bool {
	switch d.FullName() {
	case "coxswain.ir.v1.VirtualHost", "coxswain.ir.v1.Cluster", "coxswain.ir.v1.Secret":
		return true
	}
	return false
}

func envelope(d protoreflect.MessageDescriptor) bool {
	switch d.FullName() {
	case "coxswain.ir.v1.Snapshot", "coxswain.ir.v1.Listener", "coxswain.ir.v1.Server":
		return true
	}
	return false
}

var deterministic = proto.MarshalOptions{Deterministic: true}

func (s *Sealer) appendMessage(b []byte, m protoreflect.Message) ([]byte, error) {
	if !remembered(m.Descriptor()) {
		return s.encode(b, m)
	}
	key := m.Interface()
	e := s.encoded[key]
	if e == nil {
		enc, err := deterministic.Marshal(key)
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
	return append(b, e.b...), nil
}

// encode appends m's encoding: an envelope field by field (the snapshot without its version),
// anything else by the library.
func (s *Sealer) encode(b []byte, m protoreflect.Message) ([]byte, error) {
	d := m.Descriptor()
	if !envelope(d) || len(m.GetUnknown()) > 0 {
		return deterministic.MarshalAppend(b, m.Interface())
	}
	snapshot := d.FullName() == "coxswain.ir.v1.Snapshot"
	for _, fd := range fieldOrder[d.FullName()] {
		if !m.Has(fd) || (snapshot && fd.Number() == snapshotVersion) {
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

const snapshotVersion protoreflect.FieldNumber = 1

func (s *Sealer) appendSub(b []byte, num protoreflect.FieldNumber, m protoreflect.Message) ([]byte, error) {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	// Encode after the tag, then move it to make room for the length, known only now.
	at := len(b)
	b, err := s.appendMessage(b, m)
	if err != nil {
		return nil, err
	}
	n := len(b) - at
	size := protowire.SizeVarint(uint64(n))
	b = slices.Grow(b, size)[:len(b)+size]
	copy(b[at+size:], b[at:at+n])
	protowire.AppendVarint(b[:at], uint64(n))
	return b, nil
}

// appendField appends one field as the library encodes it, from a message holding it alone.
func appendField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor) ([]byte, error) {
	one := m.New()
	one.Set(fd, m.Get(fd))
	return deterministic.MarshalAppend(b, one.Interface())
}

var fieldOrder = map[protoreflect.FullName][]protoreflect.FieldDescriptor{}

func init() {
	for _, m := range []proto.Message{&irv1.Snapshot{}, &irv1.Listener{}, &irv1.Server{}} {
		d := m.ProtoReflect().Descriptor()
		fs := make([]protoreflect.FieldDescriptor, 0, d.Fields().Len())
		for i := range d.Fields().Len() {
			fs = append(fs, d.Fields().Get(i))
		}
		slices.SortFunc(fs, func(a, b protoreflect.FieldDescriptor) int { return int(a.Number()) - int(b.Number()) })
		fieldOrder[d.FullName()] = fs
	}
}
