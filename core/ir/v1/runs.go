package irv1

import (
	"crypto/sha256"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The runs of a part field (version.go) and how a Sealer takes the unchanged ones from its
// previous seal.

// run is one run of a remembered list as a seal hashed it: its messages' addresses, their hashes
// and its own. Runs are shared between the seals that have them unchanged, so never written once
// made.
type run struct {
	msgs []unsafe.Pointer
	sums [][sha256.Size]byte
	sum  [sha256.Size]byte
	// open: its last element does not end a run (the list ended there), so it is the same run
	// only at the end of a list.
	open bool
}

// runHasher cuts a field's element hashes into runs and appends each run's record to the node's
// hash input.
type runHasher struct {
	num uint64
	buf *[]byte // the run being assembled (Sealer.runBufs)
}

// add takes the next element's hash, and appends the record of the run it ends, if it ends one
// (last: the field's last element), returning the run's hash.
func (h runHasher) add(b []byte, sum *[sha256.Size]byte, last bool) ([]byte, *[sha256.Size]byte) {
	*h.buf = append(*h.buf, sum[:]...)
	if !endsRun(sum) && !last {
		return b, nil
	}
	rs := sha256.Sum256(*h.buf)
	*h.buf = (*h.buf)[:0]
	return h.record(b, &rs), &rs
}

func (h runHasher) record(b []byte, rs *[sha256.Size]byte) []byte {
	b = protowire.AppendVarint(b, h.num)
	return append(b, rs[:]...)
}

// appendRunsOf appends the records of the runs of m's part field fd, hashing (or recalling) each
// element: for the nodes that are not hashed at every seal, and for a one-shot seal.
func (s *Sealer) appendRunsOf(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor, depth int) ([]byte, error) {
	l := m.Get(fd).List()
	h := runHasher{num: uint64(fd.Number()), buf: &s.runBufs[depth]}
	*h.buf = (*h.buf)[:0]
	for i := range l.Len() {
		sum, err := s.hash(l.Get(i).Message(), depth)
		if err != nil {
			return nil, err
		}
		var cut *[sha256.Size]byte
		if b, cut = h.add(b, &sum, i == l.Len()-1); cut != nil {
			s.runs++
		}
	}
	return b, nil
}

// appendField appends the records of the runs of one part field of a node hashed at every seal,
// taking the previous seal's runs of the field (prev) that are the same messages, and returns the
// field's runs for the next seal (nil for a field of nodes, hashed every time). The fields that
// hold thousands of messages are read as the generated slices they are: reflection's message
// wrapping, to get each one's address, cost more than the rest of a reseal.
func (s *Sealer) appendField(b []byte, m protoreflect.Message, fd protoreflect.FieldDescriptor, prev []*run, depth int) ([]byte, []*run, error) {
	num := uint64(fd.Number())
	if s.remembers(fd.Message()) {
		switch x := m.Interface().(type) {
		case *Server:
			if fd.Name() == "virtual_hosts" {
				return appendRemembered(s, b, num, x.VirtualHosts, prev, depth)
			}
		case *Snapshot:
			switch fd.Name() {
			case "clusters":
				return appendRemembered(s, b, num, x.Clusters, prev, depth)
			case "secrets":
				return appendRemembered(s, b, num, x.Secrets, prev, depth)
			}
		}
	}
	b, err := s.appendRunsOf(b, m, fd, depth)
	return b, nil, err
}

// appendRemembered is appendField for a generated slice of remembered messages: at each place a
// run starts, the previous seal's run of the same messages is taken whole; the other runs are
// hashed, their elements' hashes found in the previous runs near where the list was (runFinder)
// or else remembered or computed (Sealer.hash).
func appendRemembered[E any, P interface {
	*E
	proto.Message
}](s *Sealer, b []byte, num uint64, list []P, prev []*run, depth int) ([]byte, []*run, error) {
	// P is a pointer type: its slice is a slice of addresses.
	ptrs := unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(unsafe.SliceData(list))), len(list))
	f := runFinder{prev: prev}
	h := runHasher{num: num, buf: &s.runBufs[depth]}
	*h.buf = (*h.buf)[:0]
	runs := make([]*run, 0, len(prev)+1)
	var fresh *run
	for i := 0; i < len(ptrs); {
		if fresh == nil {
			if r := f.runAt(ptrs, i); r != nil {
				runs = append(runs, r)
				b = h.record(b, &r.sum)
				i += len(r.msgs)
				continue
			}
			fresh = &run{}
		}
		key := ptrs[i]
		sum, ok := f.element(key)
		if !ok {
			var err error
			if sum, err = s.hash(list[i].ProtoReflect(), depth); err != nil {
				return nil, nil, err
			}
		}
		fresh.msgs, fresh.sums = append(fresh.msgs, key), append(fresh.sums, sum)
		i++
		var cut *[sha256.Size]byte
		if b, cut = h.add(b, &sum, i == len(ptrs)); cut != nil {
			fresh.sum = *cut
			fresh.open = !endsRun(&sum)
			runs = append(runs, fresh)
			fresh = nil
			s.runs++
		}
	}
	return b, runs, nil
}

// lookAhead is how far past the expected place an element is looked for in the previous runs:
// elements removed in front of it shift it by that many.
const lookAhead = 8

// runFinder finds the previous seal's runs and elements in a list being hashed, from where the
// last one was found: a list changed in a few places is walked once, its unchanged runs taken
// after a comparison of their pointers.
type runFinder struct {
	prev []*run
	// at, off is where in prev the next element likely is (run, offset in it).
	at, off int
	// starts are prev's runs by their first message, made the first time a run was not at the
	// expected place (a run added, removed or changed in front of it).
	misses int
	starts map[unsafe.Pointer]int
}

// runAt returns the previous seal's run that list has starting at i, if it is the same run:
// i starts a run of list (the caller's position), so the same messages cut the same way.
func (f *runFinder) runAt(list []unsafe.Pointer, i int) *run {
	j := f.at
	if f.off != 0 || j >= len(f.prev) || f.prev[j].msgs[0] != list[i] {
		if f.starts == nil {
			f.starts = make(map[unsafe.Pointer]int, len(f.prev))
			for k, r := range f.prev {
				f.starts[r.msgs[0]] = k
			}
		}
		var ok bool
		if j, ok = f.starts[list[i]]; !ok {
			return nil
		}
	}
	r := f.prev[j]
	n := len(r.msgs)
	if n > len(list)-i || (r.open && n != len(list)-i) || !samePointers(r.msgs, list[i:i+n]) {
		f.at, f.off = j, 0 // its elements are likely the next ones
		return nil
	}
	f.at, f.off = j+1, 0
	return r
}

// element returns the hash of the message at key from the previous runs, looking from where the
// last one was found up to lookAhead elements on.
func (f *runFinder) element(key unsafe.Pointer) ([sha256.Size]byte, bool) {
	at, off := f.at, f.off
	for range f.reach() {
		if at >= len(f.prev) {
			break
		}
		r := f.prev[at]
		if r.msgs[off] == key {
			f.at, f.off = at, off+1
			if f.off == len(r.msgs) {
				f.at, f.off = at+1, 0
			}
			return r.sums[off], true
		}
		if off++; off == len(r.msgs) {
			at, off = at+1, 0
		}
	}
	f.misses++
	return [sha256.Size]byte{}, false
}

// reach is how many elements element looks through: far for the first few misses (elements
// removed in front shift the rest by that many; a scan of pointers), then lookAhead (the misses
// are then mostly new elements, which no scan finds).
func (f *runFinder) reach() int {
	if f.misses < farMisses {
		return farReach
	}
	return lookAhead
}

// samePointers reports whether a and b hold the same addresses, comparing their memory.
func samePointers(a, b []unsafe.Pointer) bool {
	const w = int(unsafe.Sizeof(unsafe.Pointer(nil)))
	return string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a))), len(a)*w)) ==
		string(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(b))), len(b)*w))
}

// farReach and farMisses bound the scans of element: a few hundred pointers read for each of the
// first few elements that are not near the expected place.
const (
	farReach  = 512
	farMisses = 4
)
