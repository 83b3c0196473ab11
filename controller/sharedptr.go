package controller

import (
	"reflect"
	"sync"
)

// Shared pointers to the small values of route objects. A decoded route points to each of its
// optional enum-like values through a pointer of its own: the group and kind of every parent
// and backend reference (in the spec and in the status), a path match's type, a backend's port
// and weight, ... — each a separate 8–16 B allocation, about a dozen per simple HTTPRoute, all
// holding one of a few values. sharePointers makes every such pointer of a cached route point
// to one canonical copy of its value (BenchmarkCachedRouteHeap: docs/controller.md).
//
// This is safe because a cached object is never modified, only replaced (the rule of the
// informer caches, which every reader keeps: the status writer deep-copies before it writes,
// the translator copies before it defaults), so no write through such a pointer can reach the
// other routes that share it. Which fields: pointers to a named string type, to int32 or to
// bool — optional enums, references' group/kind/namespace/section names, ports, weights,
// durations — never to a plain string (path values, hostnames and messages are per route).

// maxSharedPerType bounds the canonical copies of one type, so that a cluster whose routes all
// carry distinct values (every backend on its own port) costs a bounded map, not one per route.
const maxSharedPerType = 1024

// walkers are the compiled sharers of each route type (a func(reflect.Value)), made on first
// sight: walking by reflection and asking at every field whether its type may hold a shared
// pointer cost ~10× the rest of the transform.
var walkers sync.Map

// sharePointers replaces, in the struct v points to, every pointer to a shareable value by the
// canonical pointer to that value. v must not be shared with anyone yet (a transform's object).
func sharePointers(v reflect.Value) {
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return
	}
	t := v.Elem().Type()
	w, ok := walkers.Load(t)
	if !ok {
		w, _ = walkers.LoadOrStore(t, compileSharer(t, map[reflect.Type]*func(reflect.Value){}))
	}
	if walk := w.(func(reflect.Value)); walk != nil {
		walk(v.Elem())
	}
}

// compileSharer is the function that shares the pointers in a (settable) value of type t; nil
// when t holds none. done holds the types being compiled, for recursive types.
func compileSharer(t reflect.Type, done map[reflect.Type]*func(reflect.Value)) func(reflect.Value) {
	if f, ok := done[t]; ok { // recursion: call through what t's compilation will leave there
		return func(v reflect.Value) {
			if *f != nil {
				(*f)(v)
			}
		}
	}
	slot := new(func(reflect.Value))
	done[t] = slot
	switch t.Kind() {
	case reflect.Struct:
		type field struct {
			i    int
			walk func(reflect.Value)
		}
		var fields []field
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				if w := compileSharer(f.Type, done); w != nil {
					fields = append(fields, field{i, w})
				}
			}
		}
		if len(fields) > 0 {
			*slot = func(v reflect.Value) {
				for _, f := range fields {
					f.walk(v.Field(f.i))
				}
			}
		}
	case reflect.Slice:
		if elem := compileSharer(t.Elem(), done); elem != nil {
			*slot = func(v reflect.Value) {
				for i := range v.Len() {
					elem(v.Index(i))
				}
			}
		}
	case reflect.Pointer:
		if shareable(t.Elem()) {
			values := &sharedOf{t: t.Elem()}
			*slot = func(v reflect.Value) {
				if !v.IsNil() {
					if c, ok := values.canonical(v); ok {
						v.Set(c)
					}
				}
			}
		} else if elem := compileSharer(t.Elem(), done); elem != nil {
			*slot = func(v reflect.Value) {
				if !v.IsNil() {
					elem(v.Elem())
				}
			}
		}
	}
	return *slot
}

// shareable: a type whose values sharePointers shares (see the comment at the top).
func shareable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String:
		return t.PkgPath() != "" // a named string type: an enum, a reference's name part
	case reflect.Int32, reflect.Bool:
		return true
	}
	return false
}

// sharedOf are the canonical copies of the values of one type, for the route kind whose sharer
// holds it (each kind has its own: the same value in two kinds is two copies, a few bytes).
type sharedOf struct {
	t      reflect.Type
	mu     sync.Mutex
	values map[any]reflect.Value
}

// canonical is the shared pointer to the value p points to, made on first sight; false when
// maxSharedPerType values have copies already.
func (s *sharedOf) canonical(p reflect.Value) (reflect.Value, bool) {
	val := p.Elem().Interface()
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.values[val]; ok {
		return c, true
	}
	if len(s.values) >= maxSharedPerType {
		return reflect.Value{}, false
	}
	if s.values == nil {
		s.values = map[any]reflect.Value{}
	}
	c := reflect.New(s.t)
	if s.t.Kind() == reflect.String {
		c.Elem().SetString(intern(p.Elem().String()))
	} else {
		c.Elem().Set(p.Elem())
	}
	s.values[val] = c
	return c, true
}
