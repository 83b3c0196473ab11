package core

import (
	"context"
	"testing"
)

type closeCounter struct{ closed *int }

func (c *closeCounter) Close() error { *c.closed++; return nil }

// A value outlives the table that made it while a newer table holds it, and is closed with the
// last one.
func TestSharedStateOutlivesTables(t *testing.T) {
	s := NewSharedState()
	closed, made := 0, 0
	mk := func() (*closeCounter, error) { made++; return &closeCounter{&closed}, nil }
	newBC := func() *BuildContext {
		bc := NewBuildContext(context.Background(), nil, NewRegistry(), nil)
		bc.Shared = s
		return bc
	}
	old := newBC()
	v1, err := Shared(old, "m.k", mk)
	if err != nil {
		t.Fatal(err)
	}
	cur := newBC()
	v2, _ := Shared(cur, "m.k", mk)
	if v1 != v2 || made != 1 {
		t.Fatalf("second table got a new value (made %d)", made)
	}
	if err := old.Close(); err != nil || closed != 0 || s.Len() != 1 {
		t.Fatalf("retiring the old table closed a value the current one holds: closed=%d len=%d err=%v", closed, s.Len(), err)
	}
	if _, err := Shared(cur, "m.other", func() (string, error) { return "x", nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := Shared(cur, "m.k", func() (string, error) { return "", nil }); err == nil {
		t.Fatal("a key holding another type was returned without an error")
	}
	if err := cur.Close(); err != nil || closed != 1 || s.Len() != 0 {
		t.Fatalf("after the last table: closed=%d len=%d err=%v", closed, s.Len(), err)
	}
	again := newBC()
	if _, err := Shared(again, "m.k", mk); err != nil || made != 2 {
		t.Fatalf("a dropped key was not made anew (made %d)", made)
	}
}
