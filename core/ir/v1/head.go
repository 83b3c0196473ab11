package irv1

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ListenerHead is a shallow copy of l without its servers: what the listener is apart from its
// children (hashed apart from them by the proxy, diffed apart from them by discovery deltas).
func ListenerHead(l *Listener) *Listener { return without(l, "servers").(*Listener) }

// ServerHead is a shallow copy of s without its virtual hosts.
func ServerHead(s *Server) *Server { return without(s, "virtual_hosts").(*Server) }

// without copies m field by field except the field named skip, by reflection, so a field added
// to the message is part of its head without a change here.
func without(m proto.Message, skip protoreflect.Name) proto.Message {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Name() != skip {
			dst.Set(fd, v)
		}
		return true
	})
	return dst.Interface()
}
