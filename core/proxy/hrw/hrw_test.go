package hrw

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
)

func nodes(weights ...uint32) Nodes {
	n := Make(len(weights))
	for i, w := range weights {
		n.Add(fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1), w)
	}
	return n
}

func equal(n int) Nodes { return nodes(slices.Repeat([]uint32{1}, n)...) }

func keyOf(k int) uint64 { return Key("user-" + strconv.Itoa(k)) }

// TestGolden pins the scores: proxies of different versions in one fleet (a rolling upgrade) must
// send a key to the same node, and the values are those lb.hash computed before this package
// existed.
func TestGolden(t *testing.T) {
	cases := []struct {
		weights []uint32
		want    []int
	}{
		{[]uint32{1, 1, 1, 1, 1}, []int{4, 3, 2, 2, 4, 2, 2, 2, 1, 3, 4, 4}},
		{[]uint32{1, 2, 3, 4, 5}, []int{4, 3, 2, 2, 4, 2, 2, 4, 3, 3, 4, 4}},
	}
	for _, tc := range cases {
		n := nodes(tc.weights...)
		got := make([]int, len(tc.want))
		for k := range got {
			got[k] = n.Pick(keyOf(k))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("weights %v: picks %v, want %v", tc.weights, got, tc.want)
		}
	}
}

func TestEmpty(t *testing.T) {
	var n Nodes
	if i := n.Pick(1); i != -1 {
		t.Errorf("Pick on no nodes = %d, want -1", i)
	}
	one := equal(1)
	for k := range 100 {
		if i := one.Pick(keyOf(k)); i != 0 {
			t.Fatalf("Pick on one node = %d", i)
		}
	}
}

// TestEven: 10,000 distinct keys over N equal nodes give each about 1/N of them.
func TestEven(t *testing.T) {
	const keys = 10000
	for _, size := range []int{3, 10, 50} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			n := equal(size)
			got := make([]int, size)
			for k := range keys {
				got[n.Pick(keyOf(k))]++
			}
			want := keys / size
			for i, c := range got {
				// ±30% at 50 nodes (200 keys each: a few standard deviations), tighter below.
				if d := c - want; d < -want*3/10 || d > want*3/10 {
					t.Errorf("node %d has %d keys, want %d ±30%%", i, c, want)
				}
			}
		})
	}
}

// TestRemovingOneMovesOnlyItsKeys: with 10,000 keys over N nodes, removing one moves exactly the
// keys it had, and those are fewer than 1.5/N of them.
func TestRemovingOneMovesOnlyItsKeys(t *testing.T) {
	const keys = 10000
	for _, size := range []int{2, 5, 10, 50} {
		for _, weights := range []string{"equal", "weighted"} {
			t.Run(fmt.Sprintf("%d/%s", size, weights), func(t *testing.T) {
				ws := slices.Repeat([]uint32{1}, size)
				if weights == "weighted" {
					for i := range ws {
						ws[i] = uint32(1 + i%2) // half have weight 2: the removed one (size/2) varies
					}
				}
				before, after := nodes(ws...), Make(size-1)
				gone := size / 2
				for i, w := range ws {
					if i != gone {
						after.Add(fmt.Sprintf("10.0.%d.%d:8080", i/250, i%250+1), w)
					}
				}
				moved := 0
				for k := range keys {
					was, now := before.Pick(keyOf(k)), after.Pick(keyOf(k))
					if now >= gone {
						now++ // back to before's indices
					}
					switch {
					case was != gone && now != was:
						t.Fatalf("key %d moved from node %d, which is still there, to %d", k, was, now)
					case was == gone:
						moved++
					}
				}
				limit := keys * 3 / (2 * size)
				if weights == "weighted" {
					// The removed node's share is its weight over the total.
					total := 0
					for _, w := range ws {
						total += int(w)
					}
					limit = keys * int(ws[gone]) * 3 / (2 * total)
				}
				t.Logf("%d of %d keys moved (bound %d)", moved, keys, limit)
				if moved == 0 || moved > limit {
					t.Errorf("%d keys moved, want between 1 and %d", moved, limit)
				}
			})
		}
	}
}

// TestWeightedShares: each node gets about its weight's share of the keys.
func TestWeightedShares(t *testing.T) {
	const keys = 20000
	weights := []uint32{1, 2, 3, 4}
	n := nodes(weights...)
	got := make([]int, len(weights))
	for k := range keys {
		got[n.Pick(keyOf(k))]++
	}
	for i, w := range weights {
		want := keys * int(w) / 10
		if d := got[i] - want; d < -want/10 || d > want/10 {
			t.Errorf("weight %d: %d keys, want %d ±10%%", w, got[i], want)
		}
	}
}

// TestZeroWeightIsOne: weight 0 counts as 1, so a list of zeros is not weighted.
func TestZeroWeightIsOne(t *testing.T) {
	a, b := nodes(0, 0, 0), nodes(1, 1, 1)
	if a.weighted {
		t.Fatal("zero weights made a weighted list")
	}
	for k := range 1000 {
		if a.Pick(keyOf(k)) != b.Pick(keyOf(k)) {
			t.Fatalf("key %d: weight 0 and weight 1 disagree", k)
		}
	}
}

func TestKeyPieces(t *testing.T) {
	if Key("ab") != Byte(Byte(Offset, 'a'), 'b') || Key("ab") != String(String(Offset, "a"), "b") {
		t.Fatal("a key built piecewise differs from the whole")
	}
}

func BenchmarkPick(b *testing.B) {
	for _, weighted := range []bool{false, true} {
		for _, size := range []int{1, 10, 100} {
			ws := slices.Repeat([]uint32{1}, size)
			if weighted {
				ws[0] = 2
			}
			name := fmt.Sprintf("equal/%d", size)
			if weighted {
				name = fmt.Sprintf("weighted/%d", size)
			}
			b.Run(name, func(b *testing.B) {
				n := nodes(ws...)
				key := Key("user-12345")
				b.ReportAllocs()
				for b.Loop() {
					_ = n.Pick(key)
				}
			})
		}
	}
}
