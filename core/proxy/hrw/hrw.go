// Package hrw is rendezvous (highest random weight) hashing of keys onto a set of weighted nodes:
// every node scores a key, the highest score wins, so equal keys go to the same node and removing
// one of N nodes moves only the keys that were on it (about 1/N of them). The lb.hash balancer and
// the engine's header session persistence use it.
//
// Scores depend only on the key and the nodes' names, never on a process seed: every proxy of a
// fleet, and every version of it, must send a key to the same node (TestGolden pins the values).
// A key is the FNV-1a hash of its bytes (Key, String, Byte); a node's seed is the splitmix64 mix
// of the FNV-1a hash of its name ("address:port"), and its score for a key is
// splitmix64(key ^ seed). With unequal weights the score is weight / -ln(u), u the score scaled
// into (0, 1), which gives each node a share of the keys proportional to its weight and keeps the
// stability property.
package hrw

import "math"

// Nodes is a list of weighted nodes, in the caller's order (Pick returns an index into it). The
// zero value is empty. Pick is safe concurrently with other Picks; Add is not.
type Nodes struct {
	seeds    []uint64 // seeds[i] is Seed(name of node i)
	weights  []uint32
	weighted bool // the weights differ
}

// Make returns an empty list with room for n nodes.
func Make(n int) Nodes {
	return Nodes{seeds: make([]uint64, 0, n), weights: make([]uint32, 0, n)}
}

// Add appends the node called name (its "address:port") of the given weight (0 counts as 1).
func (n *Nodes) Add(name string, weight uint32) {
	weight = max(weight, 1)
	n.seeds = append(n.seeds, Seed(name))
	n.weights = append(n.weights, weight)
	n.weighted = n.weighted || weight != n.weights[0]
}

// Len is the number of nodes.
func (n *Nodes) Len() int { return len(n.seeds) }

// Pick returns the index of the node with the highest score for key, -1 when there is none.
func (n *Nodes) Pick(key uint64) int {
	best := -1
	if !n.weighted {
		var top uint64
		for i, seed := range n.seeds {
			if v := mix(key ^ seed); v > top || i == 0 {
				best, top = i, v
			}
		}
		return best
	}
	top := math.Inf(-1)
	for i, seed := range n.seeds {
		// u in (0, 1): the top 53 bits, offset by half a step so that neither end is reached.
		u := (float64(mix(key^seed)>>11) + 0.5) / (1 << 53)
		if v := float64(n.weights[i]) / -math.Log(u); v > top {
			best, top = i, v
		}
	}
	return best
}

// Seed is the seed of the node called name.
func Seed(name string) uint64 { return mix(String(Offset, name)) }

// FNV-1a, 64 bits: fixed, so that every proxy computes the same scores.
const (
	// Offset is the FNV-1a hash of nothing: the start of a key built with String and Byte.
	Offset uint64 = 14695981039346656037
	prime  uint64 = 1099511628211
)

// Key is the key of s: String(Offset, s).
func Key(s string) uint64 { return String(Offset, s) }

// String extends the key h with the bytes of s.
func String(h uint64, s string) uint64 {
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * prime
	}
	return h
}

// Byte extends the key h with b.
func Byte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * prime }

// mix is the splitmix64 finalizer: it spreads FNV's weak low bits over the whole word, so that
// key ^ seed gives each node an independent-looking score.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
