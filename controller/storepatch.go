package controller

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// A route change is told by key. The informers of the route kinds (but implicit ones) record
// the key of every route they add, delete or see change (routeHandler) in a changeLog, next to
// the dirty bit and the coalescer's notify; the driver takes the keys with the bits and makes
// the next Store from the previous one, replacing only the routes of those keys in their
// kinds' lists (patchStore), instead of listing every cache into a new Store: at thousands of
// routes the listing was ~1 ms of each change (`listed` in the `published` line). The same keys,
// with the objects the Store now holds, are the translation's translator.Changes, so that the
// translation too visits what changed (controller/translator/changes.go).
//
// Any other change (changeConfig) lists every cache afresh, as before, and translates without
// Changes; so does the first translation of a leadership term. The keys and the Store cannot
// disagree: the Store is patched from the informers' caches by exactly the keys the Changes
// name, and an event that lands after the keys were taken sets its key and bit again for the
// next translation (a handler runs after its cache was updated, and records before it notifies).

// changeLog collects the keys of changed routes between translations.
type changeLog struct {
	mu   sync.Mutex
	keys map[schema.GroupKind]map[types.NamespacedName]struct{}
}

func (l *changeLog) add(gk schema.GroupKind, key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[schema.GroupKind]map[types.NamespacedName]struct{}{}
	}
	if l.keys[gk] == nil {
		l.keys[gk] = map[types.NamespacedName]struct{}{}
	}
	l.keys[gk][key] = struct{}{}
}

// take returns the keys collected since the previous take.
func (l *changeLog) take() map[schema.GroupKind]map[types.NamespacedName]struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := l.keys
	l.keys = nil
	return keys
}

// nextStore is the Store for a translation of changes ch, with the route keys taken with them:
// prev patched when prev is the watch's latest Store and nothing but routes and EndpointSlices
// changed (patched; changed are then the route objects by key, as the Store holds them, nil
// for gone), else every cache listed afresh.
func (w *watch) nextStore(prev *translator.Store, ch change, keys map[schema.GroupKind]map[types.NamespacedName]struct{}) (
	s *translator.Store, changed map[schema.GroupKind]map[types.NamespacedName]translation.Object, patched bool, err error) {
	if prev != nil && prev == w.latest && ch&changeConfig == 0 {
		if s, changed, ok := w.patchStore(prev, ch, keys); ok {
			w.latest = s
			return s, changed, true, nil
		}
	}
	s, err = w.store()
	if err != nil {
		return nil, nil, false, err
	}
	for _, mk := range w.kinds {
		mk.index = nil // of the previous lists: built again from this Store's when needed
	}
	w.latest = s
	return s, nil, false, nil
}

// patchStore is prev with fresh EndpointSlices when they changed and the routes of keys
// replaced; false when a kind of keys cannot be patched (not a keyed kind, or not started).
func (w *watch) patchStore(prev *translator.Store, ch change, keys map[schema.GroupKind]map[types.NamespacedName]struct{}) (
	*translator.Store, map[schema.GroupKind]map[types.NamespacedName]translation.Object, bool) {
	byKind := map[schema.GroupKind]*moduleKind{}
	for gk := range keys {
		for _, mk := range w.kinds {
			if mk.gk == gk && mk.keyed && mk.isStarted() {
				byKind[gk] = mk
			}
		}
		if byKind[gk] == nil {
			return nil, nil, false
		}
	}
	s := *prev // the lists nothing changed in are shared with prev: nobody modifies a Store
	if ch&changeEndpoints != 0 {
		var err error
		if s.EndpointSlices, err = w.slices.List(labels.Everything()); err != nil {
			return nil, nil, false
		}
	}
	if len(keys) == 0 {
		return &s, nil, true
	}
	s.Objects = maps.Clone(prev.Objects)
	if s.Objects == nil {
		s.Objects = map[schema.GroupKind][]translation.Object{}
	}
	changed := make(map[schema.GroupKind]map[types.NamespacedName]translation.Object, len(keys))
	for gk, set := range keys {
		list, objs, err := byKind[gk].patch(prev.Objects[gk], set)
		if err != nil {
			return nil, nil, false
		}
		s.Objects[gk], changed[gk] = list, objs
	}
	return &s, changed, true
}

// patch returns a copy of list, the kind's list of the watch's latest Store, with the objects
// of keys as the cache holds them now, and those objects by key (nil: gone).
func (mk *moduleKind) patch(list []translation.Object, keys map[types.NamespacedName]struct{}) (
	[]translation.Object, map[types.NamespacedName]translation.Object, error) {
	if mk.index == nil {
		mk.index = make(map[types.NamespacedName]int, len(list))
		for i, o := range list {
			mk.index[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = i
		}
	}
	out := slices.Clone(list)
	objs := make(map[types.NamespacedName]translation.Object, len(keys))
	for key := range keys {
		cacheKey := key.Name
		if key.Namespace != "" {
			cacheKey = key.Namespace + "/" + key.Name
		}
		cached, exists, err := mk.informer.GetIndexer().GetByKey(cacheKey)
		if err != nil {
			mk.index = nil
			return nil, nil, err
		}
		i, had := mk.index[key]
		if !exists {
			objs[key] = nil
			if had { // gone: the last object takes its place
				last := len(out) - 1
				out[i] = out[last]
				mk.index[types.NamespacedName{Namespace: out[i].GetNamespace(), Name: out[i].GetName()}] = i
				out = out[:last]
				delete(mk.index, key)
			}
			continue
		}
		obj, ok := cached.(translation.Object)
		if !ok {
			mk.index = nil
			return nil, nil, fmt.Errorf("%s cache holds a %T", mk.gk, cached)
		}
		objs[key] = obj
		if had {
			out[i] = obj
		} else {
			mk.index[key] = len(out)
			out = append(out, obj)
		}
	}
	return out, objs, nil
}
