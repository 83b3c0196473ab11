package irv1

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Shallow copies m's fields (by reflection, so fields added later are copied too); its
// children are shared. Deltas are applied to shallow copies of the containers they replace
// children of, so the snapshot being served is never written.
func Shallow[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return dst.Interface().(M)
}
