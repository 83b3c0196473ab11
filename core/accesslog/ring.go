package accesslog

import (
	"sync/atomic"
	"unsafe"
)

// ring is the bounded queue between the goroutines that log and the one writer: a fixed array
// of record slots, each with a sequence number (Dmitry Vyukov's bounded MPMC queue, used here
// with a single consumer). A producer claims a slot with one compare-and-swap and publishes it
// with one store; the writer encodes the record in its slot and hands the slot back. Neither
// side takes a lock or copies the record a second time, where a channel of records took its
// lock on both sides and copied each record in and out again.
type ring struct {
	slots []slot
	mask  uint64
	_     [64]byte // head is written by every producer: keep it off the slots' header line
	head  atomic.Uint64
	_     [56]byte
	// tail is the next slot the writer reads. Only the writer moves it; producers read it to
	// tell how full the ring is.
	tail atomic.Uint64
}

type slot struct {
	// seq is the position the slot is ready for: a producer may fill it when seq equals the
	// producer's position, the writer may read it when seq is that position + 1.
	seq atomic.Uint64
	rec Record
	// Slots are a whole number of cache lines (the array is page-aligned: the heap allocates
	// large objects so), so that filling one stores to as few lines as its fields span: under
	// load the slot a producer claims was last touched a lap of the ring ago and is out of the
	// cache, and publishing it waits for every one of those lines.
	_ [(cacheLine - (unsafe.Sizeof(atomic.Uint64{})+unsafe.Sizeof(Record{}))%cacheLine) % cacheLine]byte
}

const cacheLine = 64

// newRing makes a ring of at least n slots (rounded up to a power of two).
func newRing(n int) *ring {
	size := 1
	for size < n {
		size <<= 1
	}
	r := &ring{slots: make([]slot, size), mask: uint64(size - 1)}
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
	return r
}

// claim takes the next free slot for a producer to fill in place, nil when the ring is full. The
// slot is zero (release cleared it); the producer must publish it, and soon: the writer reads
// the slots in order, so an unpublished slot holds back every record after it.
func (q *ring) claim() *slot {
	pos := q.head.Load()
	for {
		s := &q.slots[pos&q.mask]
		seq := s.seq.Load()
		switch d := int64(seq - pos); {
		case d == 0:
			if q.head.CompareAndSwap(pos, pos+1) {
				return s
			}
			pos = q.head.Load()
		case d < 0: // the slot still holds the record of the previous lap: full
			return nil
		default: // another producer took pos
			pos = q.head.Load()
		}
	}
}

// publish hands a claimed slot, filled, to the writer. Between claim and publish its seq is the
// position it was claimed at, and no other goroutine writes it.
func (s *slot) publish() { s.seq.Store(s.seq.Load() + 1) }

// len is about how many records wait (exact when no producer is between claim and publish).
func (q *ring) len() int { return int(q.head.Load() - q.tail.Load()) }

// cap is the number of slots.
func (q *ring) cap() int { return len(q.slots) }

// peek returns the next record for the writer, nil when none is published yet (the ring is
// empty, or the producer of the next slot has claimed it but not finished copying).
func (q *ring) peek() *Record {
	pos := q.tail.Load()
	s := &q.slots[pos&q.mask]
	if s.seq.Load() != pos+1 {
		return nil
	}
	return &s.rec
}

// release hands the slot peek returned back to the producers, clearing it so that the strings
// it referenced can be collected.
func (q *ring) release() {
	pos := q.tail.Load()
	s := &q.slots[pos&q.mask]
	s.rec = Record{}
	s.seq.Store(pos + q.mask + 1)
	q.tail.Store(pos + 1)
}
