package proxy

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestNormalizeHost(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "example.com", "example.com"},
		{"port stripped", "example.com:8080", "example.com"},
		{"trailing dot", "example.com.", "example.com"},
		{"trailing dot and port", "Example.COM.:443", "example.com"},
		{"upper case lowered", "FOO.Example.com", "foo.example.com"},
		{"ipv6 literal keeps brackets", "[::1]", "[::1]"},
		{"ipv6 literal with port", "[::1]:80", "[::1]"},
		{"empty", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := normalizeHost(tc.in); got != tc.want {
				t.Fatalf("normalizeHost(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { _ = normalizeHost("example.com:80") }); n != 0 {
		t.Fatalf("normalizeHost of a lower-case host allocates %v times", n)
	}
}

// TestHostIndex follows Gateway API hostname matching (Listener.hostname and HTTPRoute.hostnames):
// exact names beat wildcards, the longest wildcard suffix wins, a wildcard covers one or more labels
// but not its own suffix, and "" catches the rest.
func TestHostIndex(t *testing.T) {
	var ix hostIndex[string]
	for _, h := range []string{"foo.example.com", "*.example.com", "*.bar.example.com", "", "Mixed.Example.org"} {
		if err := ix.add(h, h); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ name, host, want string }{
		{"exact hostname beats wildcard", "foo.example.com", "foo.example.com"},
		{"wildcard matches one label", "baz.example.com", "*.example.com"},
		{"wildcard matches several labels", "a.b.example.com", "*.example.com"},
		{"most specific wildcard wins", "x.bar.example.com", "*.bar.example.com"},
		{"wildcard does not match its own suffix", "example.com", ""},
		{"suffix must be on a label boundary", "fooexample.com", ""},
		{"exact match is case-insensitive", "mixed.example.org", "Mixed.Example.org"},
		{"unknown host falls to the catch-all", "other.net", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ix.lookup(tc.host)
			if !ok || got != tc.want {
				t.Fatalf("lookup(%q) = %q, %v; want %q", tc.host, got, ok, tc.want)
			}
		})
	}
	t.Run("walk visits every candidate most specific first", func(t *testing.T) {
		var got []string
		for v, pos, ok := ix.next("x.bar.example.com", 0); ok; v, pos, ok = ix.next("x.bar.example.com", pos) {
			got = append(got, v)
		}
		want := []string{"*.bar.example.com", "*.example.com", ""}
		if len(got) != len(want) {
			t.Fatalf("walk = %q, want %q", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("walk = %q, want %q", got, want)
			}
		}
	})
	t.Run("no catch-all means no match", func(t *testing.T) {
		var only hostIndex[int]
		_ = only.add("*.example.com", 1)
		if _, ok := only.lookup("example.com"); ok {
			t.Fatal("example.com matched *.example.com")
		}
	})
	t.Run("duplicates rejected", func(t *testing.T) {
		var d hostIndex[int]
		_ = d.add("a.example.com", 1)
		if err := d.add("A.example.com", 2); err == nil {
			t.Fatal("duplicate exact hostname accepted")
		}
	})
}

// A fork of an index large enough to be sharded (names) holds the same entries, takes writes
// without showing them in the index it came from, and stays equal to a plain map through random
// puts and deletes on both sides.
func TestHostIndexFork(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	name := func() string {
		if r.IntN(4) == 0 {
			return "*.w" + strconv.Itoa(r.IntN(4000)) + ".example"
		}
		return "h" + strconv.Itoa(r.IntN(4000)) + ".example"
	}
	var base hostIndex[int]
	want := map[string]int{}
	for len(want) < 3000 {
		n := name()
		if _, ok := want[n]; !ok {
			if err := base.add(n, len(want)); err != nil {
				t.Fatal(err)
			}
			want[n] = len(want)
		}
	}
	if len(base.exact.shards) != shardCount {
		t.Fatalf("%d shards at %d names, want %d", len(base.exact.shards), base.exact.n, shardCount)
	}
	check := func(ix *hostIndex[int], want map[string]int, what string) {
		t.Helper()
		for n, v := range want {
			if got, ok := ix.get(n); !ok || got != v {
				t.Fatalf("%s: %s is %d (%v), want %d", what, n, got, ok, v)
			}
		}
		count := 0
		ix.each(func(int) { count++ })
		if count != len(want) {
			t.Fatalf("%s: %d entries, want %d", what, count, len(want))
		}
	}
	for round := range 5 {
		fork := base.fork()
		forked := maps.Clone(want)
		for i := range 200 {
			n := name()
			if _, ok := forked[n]; ok && r.IntN(2) == 0 {
				fork.del(n)
				delete(forked, n)
				continue
			}
			if err := fork.set(n, 10000+i); err != nil {
				t.Fatal(err)
			}
			forked[n] = 10000 + i
		}
		check(&base, want, fmt.Sprintf("round %d: the index forked from", round))
		check(&fork, forked, fmt.Sprintf("round %d: the fork", round))
		if round == 2 { // the index forked from written after the fork: the fork does not see it
			for range 100 { // into shards the parent had written to before the fork, too
				n := name()
				if err := base.set(n, -1); err != nil {
					t.Fatal(err)
				}
				want[n] = -1
			}
			check(&fork, forked, fmt.Sprintf("round %d: the fork after writes to its parent", round))
			check(&base, want, fmt.Sprintf("round %d: the parent after its writes", round))
			continue // the next round forks the parent again
		}
		base, want = fork, forked // the next round forks the fork
	}
}
