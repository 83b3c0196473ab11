package wrr

import (
	"fmt"
	"sync"
	"testing"
)

func counts(s *Schedule, n int, size int) []int {
	c := make([]int, size)
	for range n {
		c[s.Next()]++
	}
	return c
}

func TestExactProportionsPerCycle(t *testing.T) {
	cases := []struct {
		name    string
		weights []uint32
	}{
		{"equal", []uint32{1, 1, 1}},
		{"gcd reduced", []uint32{20, 40, 60}},
		{"with zero weights", []uint32{0, 3, 0, 1}},
		{"canary 90/10", []uint32{90, 10}},
		{"large totals use the stride walk", []uint32{999_999, 1, 5000, 3}},
		{"many endpoints", func() []uint32 {
			w := make([]uint32, 300)
			for i := range w {
				w[i] = uint32(i%7 + 1)
			}
			return w
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.weights)
			var g, total uint64
			for _, w := range tc.weights {
				g = gcd(g, uint64(w))
			}
			for _, w := range tc.weights {
				total += uint64(w) / g
			}
			if s.Len() != total {
				t.Fatalf("Len = %d, want %d", s.Len(), total)
			}
			s.Seek(12345)
			got := counts(s, int(total), len(tc.weights))
			for i, w := range tc.weights {
				if want := int(uint64(w) / g); got[i] != want {
					t.Errorf("index %d picked %d times in one cycle, want %d", i, got[i], want)
				}
			}
		})
	}
}

func TestSmoothInterleaving(t *testing.T) {
	s := New([]uint32{5, 1, 1})
	var got string
	for range 7 {
		got += string(rune('a' + s.Next()))
	}
	if got != "aabacaa" {
		t.Fatalf("order = %q, want nginx's smooth order aabacaa", got)
	}
}

func TestStrideSpreadsHeavyEntries(t *testing.T) {
	// 3000:3000 exceeds nothing, but 6000:3000 with a third entry forces the stride walk; no entry may
	// be picked in long runs.
	s := New([]uint32{6001, 3000, 1})
	if s.seq != nil {
		t.Fatal("expected the stride walk")
	}
	run, maxRun, last := 0, 0, -1
	for range 10000 {
		i := s.Next()
		if i == last {
			run++
		} else {
			run = 1
		}
		last = i
		maxRun = max(maxRun, run)
	}
	if maxRun > 4 {
		t.Fatalf("longest run %d; the walk should interleave", maxRun)
	}
}

func TestNothingPickable(t *testing.T) {
	for name, s := range map[string]*Schedule{"nil": nil, "empty": New(nil), "all zero": New([]uint32{0, 0})} {
		if got := s.Next(); got != -1 {
			t.Errorf("%s: Next = %d, want -1", name, got)
		}
	}
	if got := New([]uint32{0, 7}).Next(); got != 1 {
		t.Errorf("single non-zero: Next = %d, want 1", got)
	}
}

func TestConcurrentNext(t *testing.T) {
	s := New([]uint32{2, 1})
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := make([]int, 2)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := counts(s, 3000, 2)
			mu.Lock()
			total[0] += c[0]
			total[1] += c[1]
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total[0] != 16000 || total[1] != 8000 {
		t.Fatalf("picks = %v, want [16000 8000] (exact: 8×3000 picks are whole cycles)", total)
	}
}

func BenchmarkNext(b *testing.B) {
	for _, n := range []int{2, 10, 1000} {
		w := make([]uint32, n)
		for i := range w {
			w[i] = uint32(i%5 + 1)
		}
		w[0] = 100_000 // force the stride walk for n > 2 too
		s := New(w)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = s.Next()
				}
			})
		})
	}
}

// TestSharedSchedules: schedules of one pickable entry (or none) are shared and stateless.
func TestSharedSchedules(t *testing.T) {
	tests := []struct {
		name    string
		weights []uint32
		want    int
		shared  bool
	}{
		{name: "none", weights: nil, want: -1, shared: true},
		{name: "all zero", weights: []uint32{0, 0}, want: -1, shared: true},
		{name: "one", weights: []uint32{7}, want: 0, shared: true},
		{name: "one of three", weights: []uint32{0, 3, 0}, want: 1, shared: true},
		{name: "beyond the shared ones", weights: append(make([]uint32, 100), 1), want: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := New(tt.weights), New(tt.weights)
			if (a == b) != tt.shared {
				t.Fatalf("shared = %v, want %v", a == b, tt.shared)
			}
			a.Seek(12345)
			for range 3 {
				if got := b.Next(); got != tt.want {
					t.Fatalf("Next = %d, want %d", got, tt.want)
				}
			}
		})
	}
}
