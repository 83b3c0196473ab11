package accesslog

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
	"unsafe"
)

// put copies rec into a free slot, false when the ring is full: the tests' producer (the
// Logger claims and publishes slots itself).
func (q *ring) put(rec *Record) bool {
	s := q.claim()
	if s == nil {
		return false
	}
	s.rec = *rec
	s.publish()
	return true
}

// TestRingManyProducers: records put by many goroutines at once come out once each, none lost
// or doubled, while the reader drains concurrently (run under -race: the slot hand-over is
// what orders the record's copy and its read).
func TestRingManyProducers(t *testing.T) {
	const producers, each = 8, 2000
	q := newRing(64)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				r := Record{Path: strconv.Itoa(p) + "/" + strconv.Itoa(i), Status: p}
				for !q.put(&r) { // full: wait for the reader
					runtime.Gosched()
				}
			}
		})
	}
	seen := make(map[string]bool, producers*each)
	next := make([]int, producers) // each producer's records come out in its order
	for len(seen) < producers*each {
		r := q.peek()
		if r == nil {
			runtime.Gosched()
			continue
		}
		if seen[r.Path] {
			t.Fatalf("%s twice", r.Path)
		}
		seen[r.Path] = true
		if want := strconv.Itoa(r.Status) + "/" + strconv.Itoa(next[r.Status]); r.Path != want {
			t.Fatalf("got %s, want %s next", r.Path, want)
		}
		next[r.Status]++
		q.release()
	}
	wg.Wait()
	if q.peek() != nil || q.len() != 0 {
		t.Fatalf("records left: %d", q.len())
	}
}

// TestRingFull: a ring takes its size in records (n rounded up to a power of two) and refuses
// the next until the reader releases one.
func TestRingFull(t *testing.T) {
	q := newRing(3)
	for i := range 4 {
		if !q.put(&Record{Status: i}) {
			t.Fatalf("put %d refused", i)
		}
	}
	if q.put(&Record{}) {
		t.Fatal("a full ring took a fifth record")
	}
	if r := q.peek(); r == nil || r.Status != 0 {
		t.Fatalf("peek %v", r)
	}
	q.release()
	if !q.put(&Record{Status: 4}) {
		t.Fatal("a released slot is not reused")
	}
	for i := 1; i <= 4; i++ {
		r := q.peek()
		if r == nil || r.Status != i {
			t.Fatalf("record %d: %v", i, r)
		}
		q.release()
	}
}

// TestRingClaimOrder: the writer takes slots in the order they were claimed, so a slot claimed
// and not yet published holds back one published after it.
func TestRingClaimOrder(t *testing.T) {
	q := newRing(4)
	a, b := q.claim(), q.claim()
	a.rec.Status, b.rec.Status = 1, 2
	b.publish()
	if r := q.peek(); r != nil {
		t.Fatalf("peek returned %d before the first claimed slot was published", r.Status)
	}
	a.publish()
	for _, want := range []int{1, 2} {
		r := q.peek()
		if r == nil || r.Status != want {
			t.Fatalf("peek = %v, want status %d", r, want)
		}
		q.release()
	}
	if q.peek() != nil {
		t.Fatal("peek on an empty ring returned a record")
	}
}

// TestSlotLayout: a slot is a whole number of cache lines, and what an HTTP request's record
// sets (all but Query and Error) lies in its first five, so that filling one stores to five lines
// (ring.go says why that matters).
func TestSlotLayout(t *testing.T) {
	var s slot
	if size := unsafe.Sizeof(s); size%cacheLine != 0 {
		t.Errorf("a slot is %d bytes, not a whole number of %d-byte lines", size, cacheLine)
	}
	base := unsafe.Offsetof(s.rec)
	end := func(off, size uintptr) uintptr { return base + off + size }
	for name, e := range map[string]uintptr{
		"Kind":             end(unsafe.Offsetof(s.rec.Kind), unsafe.Sizeof(s.rec.Kind)),
		"Time":             end(unsafe.Offsetof(s.rec.Time), unsafe.Sizeof(s.rec.Time)),
		"RequestID":        end(unsafe.Offsetof(s.rec.RequestID), unsafe.Sizeof(s.rec.RequestID)),
		"UpstreamDuration": end(unsafe.Offsetof(s.rec.UpstreamDuration), unsafe.Sizeof(s.rec.UpstreamDuration)),
		"PeerIP":           end(unsafe.Offsetof(s.rec.PeerIP), unsafe.Sizeof(s.rec.PeerIP)),
		"TLSSNI":           end(unsafe.Offsetof(s.rec.TLSSNI), unsafe.Sizeof(s.rec.TLSSNI)),
	} {
		if e > 5*cacheLine {
			t.Errorf("%s ends at byte %d of its slot, past the fifth cache line", name, e)
		}
	}
}
