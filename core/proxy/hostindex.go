package proxy

import (
	"fmt"
	"maps"
	"strings"
)

// hostIndex finds the entry for a request host among Gateway API hostnames: exact names, wildcards
// ("*.example.com" matches one or more labels in front of example.com, never example.com itself)
// and the catch-all "". A lookup is one map probe for the exact name, one per label boundary of the
// host for wildcards (most specific first), then the catch-all: flat in the number of entries and
// free of allocation, since probing a map with a substring does not copy it.
type hostIndex[T any] struct {
	exact  map[string]T
	wild   map[string]T // keyed by the suffix after "*."
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
		if ix.wild == nil {
			ix.wild = map[string]T{}
		}
		suffix := strings.ToLower(hostname[2:])
		if _, dup := ix.wild[suffix]; dup {
			return fmt.Errorf("hostname %q listed twice", hostname)
		}
		ix.wild[suffix] = v
	default:
		if strings.Contains(hostname, "*") {
			return fmt.Errorf("hostname %q: a wildcard must be the whole first label", hostname)
		}
		if ix.exact == nil {
			ix.exact = map[string]T{}
		}
		name := strings.ToLower(hostname)
		if _, dup := ix.exact[name]; dup {
			return fmt.Errorf("hostname %q listed twice", hostname)
		}
		ix.exact[name] = v
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
		if v, ok := ix.exact[host]; ok {
			return v, 1, true
		}
		pos = 1
	}
	if len(ix.wild) > 0 {
		for ; pos <= len(host); pos++ {
			if host[pos-1] != '.' {
				continue
			}
			if v, ok := ix.wild[host[pos:]]; ok {
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
// mostly did not change starts from a copy of the serving table's index and replaces only the
// entries that did. A copy of the maps is a copy of their memory; adding every entry again
// hashed and lower-cased every hostname.

// clone returns an index with the same entries that shares no map with ix.
func (ix *hostIndex[T]) clone() hostIndex[T] {
	return hostIndex[T]{exact: maps.Clone(ix.exact), wild: maps.Clone(ix.wild), any: ix.any, hasAny: ix.hasAny}
}

// get returns the entry added under hostname itself (no wildcard matching).
func (ix *hostIndex[T]) get(hostname string) (T, bool) {
	var v T
	var ok bool
	switch {
	case hostname == "":
		v, ok = ix.any, ix.hasAny
	case strings.HasPrefix(hostname, "*."):
		v, ok = ix.wild[strings.ToLower(hostname[2:])]
	default:
		v, ok = ix.exact[strings.ToLower(hostname)]
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
		ix.wild[strings.ToLower(hostname[2:])] = v
	default:
		ix.exact[strings.ToLower(hostname)] = v
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
		delete(ix.wild, strings.ToLower(hostname[2:]))
	default:
		delete(ix.exact, strings.ToLower(hostname))
	}
}
