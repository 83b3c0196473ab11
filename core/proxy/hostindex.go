package proxy

import (
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"strings"
)

// hostIndex finds the entry for a request host among Gateway API hostnames: exact names, wildcards
// ("*.example.com" matches one or more labels in front of example.com, never example.com itself)
// and the catch-all "". A lookup is one map probe for the exact name, one per label boundary of the
// host for wildcards (most specific first), then the catch-all: flat in the number of entries and
// free of allocation, since probing a map with a substring does not copy it.
type hostIndex[T any] struct {
	exact  names[T]
	wild   names[T] // keyed by the suffix after "*."
	any    T
	hasAny bool
}

func (ix *hostIndex[T]) add(hostname string, v T) error {
	switch {
	case hostname == "":
		if ix.hasAny {
			return fmt.Errorf("catch-all hostname listed twice")
		}
		ix.any, ix.hasAny = v, true
	case strings.HasPrefix(hostname, "*."):
		suffix := strings.ToLower(hostname[2:])
		if _, dup := ix.wild.get(suffix); dup {
			return fmt.Errorf("hostname %q listed twice", hostname)
		}
		ix.wild.put(suffix, v)
	default:
		if strings.Contains(hostname, "*") {
			return fmt.Errorf("hostname %q: a wildcard must be the whole first label", hostname)
		}
		name := strings.ToLower(hostname)
		if _, dup := ix.exact.get(name); dup {
			return fmt.Errorf("hostname %q listed twice", hostname)
		}
		ix.exact.put(name, v)
	}
	return nil
}

// lookup returns the most specific entry for host, which must be normalized (normalizeHost).
func (ix *hostIndex[T]) lookup(host string) (T, bool) {
	v, _, ok := ix.next(host, 0)
	return v, ok
}

// next returns the most specific entry for host at or after position pos, and the position to resume
// from for the next less specific one. Position 0 is the exact name, k in 1..len(host) the wildcard
// whose suffix starts at host[k] (after a dot), len(host)+1 the catch-all. Start at 0.
func (ix *hostIndex[T]) next(host string, pos int) (v T, resume int, ok bool) {
	if pos == 0 {
		if v, ok := ix.exact.get(host); ok {
			return v, 1, true
		}
		pos = 1
	}
	if ix.wild.n > 0 {
		for ; pos <= len(host); pos++ {
			if host[pos-1] != '.' {
				continue
			}
			if v, ok := ix.wild.get(host[pos:]); ok {
				return v, pos + 1, true
			}
		}
	}
	if pos <= len(host)+1 && ix.hasAny {
		return ix.any, len(host) + 2, true
	}
	return v, len(host) + 2, false
}

// normalizeHost turns a Host header or SNI name into the form hostnames are indexed by: no port, no
// trailing dot, lower case. It allocates only when the host has upper-case letters.
func normalizeHost(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.IndexByte(h[i:], ']') < 0 {
		h = h[:i]
	}
	if n := len(h); n > 0 && h[n-1] == '.' {
		h = h[:n-1]
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// The methods below serve incremental builds (vhostreuse.go): a server whose virtual hosts
// mostly did not change starts from a fork of the serving table's index and replaces only the
// entries that did. A fork shares every shard of the maps (names) and copies a shard the first
// time it writes to it; a copy of the whole map (maps.Clone, as before) cost a copy of 10,000
// entries per route change at 20,000 routes.

// fork returns an index with the same entries whose writes do not show in ix.
func (ix *hostIndex[T]) fork() hostIndex[T] {
	return hostIndex[T]{exact: ix.exact.fork(), wild: ix.wild.fork(), any: ix.any, hasAny: ix.hasAny}
}

// get returns the entry added under hostname itself (no wildcard matching).
func (ix *hostIndex[T]) get(hostname string) (T, bool) {
	var v T
	var ok bool
	switch {
	case hostname == "":
		v, ok = ix.any, ix.hasAny
	case strings.HasPrefix(hostname, "*."):
		v, ok = ix.wild.get(strings.ToLower(hostname[2:]))
	default:
		v, ok = ix.exact.get(strings.ToLower(hostname))
	}
	return v, ok
}

// set adds or replaces the entry of hostname, which add accepted before.
func (ix *hostIndex[T]) set(hostname string, v T) error {
	if _, ok := ix.get(hostname); !ok {
		return ix.add(hostname, v)
	}
	switch {
	case hostname == "":
		ix.any = v
	case strings.HasPrefix(hostname, "*."):
		ix.wild.put(strings.ToLower(hostname[2:]), v)
	default:
		ix.exact.put(strings.ToLower(hostname), v)
	}
	return nil
}

// del removes the entry of hostname.
func (ix *hostIndex[T]) del(hostname string) {
	switch {
	case hostname == "":
		var none T
		ix.any, ix.hasAny = none, false
	case strings.HasPrefix(hostname, "*."):
		ix.wild.del(strings.ToLower(hostname[2:]))
	default:
		ix.exact.del(strings.ToLower(hostname))
	}
}

// names is a map of names split, once it is large, into shards by a hash of the name, so that a
// fork that changes a few entries copies the shards they fall in (a few dozen entries each), not
// the whole map. A lookup in a sharded map hashes the name once more (maphash, a few ns) to pick
// its shard.
type names[T any] struct {
	shards []map[string]T // one, or shardCount
	// mine are the shards this map made itself and may write; a fork's shards are its
	// parent's until written.
	mine []bool
	seed maphash.Seed
	n    int
}

// shardCount shards a map of more than shardFrom names: ~20 names a shard at 5,000.
const (
	shardCount = 256
	shardFrom  = 1024
)

func (m *names[T]) shard(name string) int {
	if len(m.shards) == 1 {
		return 0
	}
	return int(maphash.String(m.seed, name) & (shardCount - 1))
}

func (m *names[T]) get(name string) (T, bool) {
	var none T
	if m.n == 0 {
		return none, false
	}
	v, ok := m.shards[m.shard(name)][name]
	return v, ok
}

// put adds or replaces name's entry.
func (m *names[T]) put(name string, v T) {
	if m.shards == nil {
		m.shards, m.mine = []map[string]T{{}}, []bool{true}
	}
	i := m.shard(name)
	m.own(i)
	if _, ok := m.shards[i][name]; !ok {
		m.n++
	}
	m.shards[i][name] = v
	if len(m.shards) == 1 && m.n > shardFrom {
		m.split()
	}
}

func (m *names[T]) del(name string) {
	if m.n == 0 {
		return
	}
	i := m.shard(name)
	if _, ok := m.shards[i][name]; !ok {
		return
	}
	m.own(i)
	delete(m.shards[i], name)
	m.n--
}

// own makes shard i this map's own before a write.
func (m *names[T]) own(i int) {
	if !m.mine[i] {
		m.shards[i], m.mine[i] = maps.Clone(m.shards[i]), true
		if m.shards[i] == nil {
			m.shards[i] = map[string]T{}
		}
	}
}

// split spreads a grown map over shardCount shards.
func (m *names[T]) split() {
	all := m.shards[0]
	m.seed = maphash.MakeSeed()
	m.shards, m.mine = make([]map[string]T, shardCount), make([]bool, shardCount)
	for i := range m.shards {
		m.shards[i], m.mine[i] = make(map[string]T, 2*len(all)/shardCount), true
	}
	for name, v := range all {
		m.shards[m.shard(name)][name] = v
	}
}

// fork returns a map of the same entries that shares m's shards until it writes to them; m, too,
// copies a shard before it writes to it from then on.
func (m *names[T]) fork() names[T] {
	f := names[T]{shards: slices.Clone(m.shards), seed: m.seed, n: m.n}
	if f.shards != nil {
		f.mine = make([]bool, len(f.shards))
		clear(m.mine)
	}
	return f
}

// each calls f for every entry.
func (m *names[T]) each(f func(T)) {
	for _, s := range m.shards {
		for _, v := range s {
			f(v)
		}
	}
}
