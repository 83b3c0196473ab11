package core

import (
	"fmt"
	"io"
	"sync"
)

// SharedState keeps module state that must outlive one routing table: a rate limiter's buckets,
// a connection to a shared store. A module asks for it in Provision (BuildContext.Shared) under a
// key it derives from what the state belongs to; the next table that asks for the same key gets
// the same value, so a config push does not reset it. A value lives while some table holds it:
// when the last table that asked for it is cleaned up, the value is dropped and, if it is an
// io.Closer, closed. A proxy has one SharedState for its lifetime.
type SharedState struct {
	mu      sync.Mutex
	entries map[string]*sharedEntry
}

type sharedEntry struct {
	value any
	refs  int
}

// NewSharedState returns an empty store.
func NewSharedState() *SharedState { return &SharedState{entries: map[string]*sharedEntry{}} }

// Shared returns the value kept under key, making it with create when no live table holds one,
// and holds it for the table being built: it is released when bc is closed. Keys share one space
// across modules: begin them with the module ID. create runs under the store's lock; keep it
// short (no network round trips: connect lazily). Without a store (a BuildContext made by a
// test), the value is made fresh and closed with bc.
func Shared[T any](bc *BuildContext, key string, create func() (T, error)) (T, error) {
	var zero T
	if bc.Shared == nil {
		v, err := create()
		if err != nil {
			return zero, err
		}
		if c, ok := any(v).(io.Closer); ok {
			bc.cleanups = append(bc.cleanups, closerCleanup{c})
		}
		return v, nil
	}
	s := bc.Shared
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key]
	if !ok {
		v, err := create()
		if err != nil {
			return zero, err
		}
		e = &sharedEntry{value: v}
		s.entries[key] = e
	}
	v, ok := e.value.(T)
	if !ok {
		return zero, fmt.Errorf("shared state %q holds a %T, not the type asked for", key, e.value)
	}
	e.refs++
	bc.cleanups = append(bc.cleanups, sharedRelease{s: s, key: key})
	return v, nil
}

// Len is the number of values kept (for tests and metrics).
func (s *SharedState) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// sharedRelease drops one table's hold on a shared value when the table is cleaned up.
type sharedRelease struct {
	s   *SharedState
	key string
}

func (r sharedRelease) Cleanup() error {
	r.s.mu.Lock()
	e := r.s.entries[r.key]
	if e == nil {
		r.s.mu.Unlock()
		return nil
	}
	e.refs--
	if e.refs > 0 {
		r.s.mu.Unlock()
		return nil
	}
	delete(r.s.entries, r.key)
	r.s.mu.Unlock()
	if c, ok := e.value.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

type closerCleanup struct{ c io.Closer }

func (c closerCleanup) Cleanup() error { return c.c.Close() }
