package proxy

import (
	"unsafe"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// vrunFinder finds the previous digest's runs of a server (shape.go) in its next list of virtual
// hosts, from where the last one was found: a list changed in a few places is walked run by run,
// each unchanged run taken after a comparison of its pointers' memory. A nil *vrunFinder finds
// nothing (a digest without remembered sums).
type vrunFinder struct {
	prev []*vrun
	// at, off is where in prev the next virtual host likely is (run, offset in it).
	at, off int
	// starts are prev's runs by their first virtual host, made the first time a run was not at
	// the expected place (a run added, removed or changed in front of it).
	misses int
	starts map[*irv1.VirtualHost]int
}

func (f *vrunFinder) prevRuns() int {
	if f == nil {
		return 0
	}
	return len(f.prev)
}

// runAt returns the previous digest's run that vhs has starting at i, if it is the same run: i
// starts a run of vhs (the caller's position), so the same messages are cut the same way.
func (f *vrunFinder) runAt(vhs []*irv1.VirtualHost, i int) *vrun {
	if f == nil || len(f.prev) == 0 {
		return nil
	}
	j := f.at
	if f.off != 0 || j >= len(f.prev) || f.prev[j].vhs[0] != vhs[i] {
		if f.starts == nil {
			f.starts = make(map[*irv1.VirtualHost]int, len(f.prev))
			for k, r := range f.prev {
				f.starts[r.vhs[0]] = k
			}
		}
		var ok bool
		if j, ok = f.starts[vhs[i]]; !ok {
			return nil
		}
	}
	r := f.prev[j]
	n := len(r.vhs)
	if n > len(vhs)-i || (r.open && n != len(vhs)-i) || !samePointers(r.vhs, vhs[i:i+n]) {
		f.at, f.off = j, 0 // its virtual hosts are likely the next ones
		return nil
	}
	f.at, f.off = j+1, 0
	return r
}

// element returns the sums of vh from the previous runs, looking from where the last one was
// found up to lookAhead virtual hosts on.
func (f *vrunFinder) element(vh *irv1.VirtualHost) (vhostSums, bool) {
	if f == nil {
		return vhostSums{}, false
	}
	at, off := f.at, f.off
	for range f.reach() {
		if at >= len(f.prev) {
			break
		}
		r := f.prev[at]
		if r.vhs[off] == vh {
			f.at, f.off = at, off+1
			if f.off == len(r.vhs) {
				f.at, f.off = at+1, 0
			}
			return r.sums[off], true
		}
		if off++; off == len(r.vhs) {
			at, off = at+1, 0
		}
	}
	f.misses++
	return vhostSums{}, false
}

// reach is how many elements element looks through: far for the first few misses (elements
// removed in front shift the rest by that many; a scan of pointers), then lookAhead (the misses
// are then mostly new elements, which no scan finds).
func (f *vrunFinder) reach() int {
	if f.misses < farMisses {
		return farReach
	}
	return lookAhead
}

// samePointers reports whether a and b hold the same pointers, comparing their memory.
func samePointers[T any](a, b []*T) bool {
	const w = int(unsafe.Sizeof(uintptr(0)))
	return string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), len(a)*w)) ==
		string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b)*w))
}

// farReach and farMisses bound the scans of element: a few hundred pointers read for each of the
// first few virtual hosts that are not near the expected place.
const (
	farReach  = 512
	farMisses = 4
)
