// Package wrr is a lock-free weighted round robin: a Schedule is computed once from a list of
// weights, then Next picks indices concurrently, in proportion to the weights, with one atomic add
// and no allocation. The engine uses it to choose among a route's weighted backends and the
// lb.round_robin balancer among a cluster's endpoints.
//
// Small schedules (weights summing to at most MaxPrecomputed after dividing by their GCD) are
// precomputed with nginx's smooth weighted round robin, so heavy entries are interleaved with light
// ones ("a a b a c a a" for 5:1:1) rather than served in runs. Larger ones walk the cumulative weights
// with a stride coprime to the total, which still visits every slot exactly once per cycle (exact
// proportions) in a well-spread order, in O(log n) per pick and O(n) memory.
package wrr

import (
	"math/bits"
	"sync/atomic"
)

// MaxPrecomputed bounds the length of a precomputed smooth schedule.
const MaxPrecomputed = 4096

// Schedule picks indices of a weight list. The zero value and nil pick nothing (Next returns -1).
type Schedule struct {
	n atomic.Uint64

	// only >= 0 when exactly one weight is non-zero: Next skips the shared counter.
	only int
	// seq is the precomputed smooth order, when the total is small.
	seq []uint32
	// cum and idx are the cumulative weights of the non-zero entries and their indices; used when
	// seq is nil.
	cum    []uint64
	idx    []uint32
	total  uint64
	stride uint64
}

// Schedules with one pickable entry, or none, have no state that Next changes, so New returns
// shared ones: a table of 10,000 one-endpoint clusters would otherwise hold 10,000 of them.
var (
	never = Schedule{only: -1}
	fixed [64]Schedule // fixed[i] always picks i
)

func init() {
	for i := range fixed {
		fixed[i].only = i
	}
}

// New computes the schedule of weights. Entries of weight 0 are never picked; if every weight is 0
// (or there are none) Next returns -1.
func New(weights []uint32) *Schedule {
	first, count := -1, 0
	for i, w := range weights {
		if w != 0 {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	switch {
	case count == 0:
		return &never
	case count == 1 && first < len(fixed):
		return &fixed[first]
	}
	s := &Schedule{only: -1}
	if count == 1 {
		s.only = first
		return s
	}
	nonzero := make([]uint32, 0, count) // indices
	var g uint64
	for i, w := range weights {
		if w != 0 {
			nonzero = append(nonzero, uint32(i))
			g = gcd(g, uint64(w))
		}
	}
	var total uint64
	for _, i := range nonzero {
		total += uint64(weights[i]) / g
	}
	s.total = total
	if total <= MaxPrecomputed {
		s.seq = smooth(weights, nonzero, g, total)
		return s
	}
	s.cum = make([]uint64, len(nonzero))
	s.idx = nonzero
	var c uint64
	for k, i := range nonzero {
		c += uint64(weights[i]) / g
		s.cum[k] = c
	}
	s.stride = coprimeStride(total)
	return s
}

// smooth is nginx's smooth weighted round robin, run for one full cycle.
func smooth(weights, nonzero []uint32, g, total uint64) []uint32 {
	seq := make([]uint32, 0, total)
	cur := make([]int64, len(nonzero))
	for range total {
		best := 0
		for k, i := range nonzero {
			cur[k] += int64(uint64(weights[i]) / g)
			if cur[k] > cur[best] {
				best = k
			}
		}
		cur[best] -= int64(total)
		seq = append(seq, nonzero[best])
	}
	return seq
}

// coprimeStride returns a stride near total/φ that is coprime with total, so that k*stride mod
// total visits every residue once per cycle and consecutive picks land far apart.
func coprimeStride(total uint64) uint64 {
	st := uint64(float64(total) * 0.6180339887498949)
	if st == 0 {
		st = 1
	}
	for gcd(st, total) != 1 {
		st++
	}
	return st % total
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// Len is the number of pickable (non-zero weight) slots per cycle: the sum of the weights divided by
// their GCD, 1 for a single entry, 0 for none.
func (s *Schedule) Len() uint64 {
	switch {
	case s == nil:
		return 0
	case s.only >= 0:
		return 1
	}
	return s.total
}

// Seek sets the position of the next pick; balancers start at a random position so that proxies
// restarted together do not all send their first requests to the same endpoint.
func (s *Schedule) Seek(pos uint64) {
	if s != nil && s.total > 0 { // a schedule of one entry or none has no position (and is shared)
		s.n.Store(pos)
	}
}

// Next returns the next index, or -1 if no weight is non-zero. It is safe for concurrent use.
func (s *Schedule) Next() int {
	if s == nil {
		return -1
	}
	if s.only >= 0 {
		return s.only
	}
	if s.total == 0 {
		return -1
	}
	k := s.n.Add(1) - 1
	if s.seq != nil {
		return int(s.seq[k%uint64(len(s.seq))])
	}
	hi, lo := bits.Mul64(k%s.total, s.stride)
	pos := bits.Rem64(hi, lo, s.total)
	// The first cumulative weight above pos is the slot's entry.
	i, j := 0, len(s.cum)
	for i < j {
		h := int(uint(i+j) >> 1)
		if s.cum[h] <= pos {
			i = h + 1
		} else {
			j = h
		}
	}
	return int(s.idx[i])
}
