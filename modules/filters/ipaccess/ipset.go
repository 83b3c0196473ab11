package ipaccess

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// ParseEntry parses one list entry: a CIDR, or a bare address meaning a single host (/32, /128).
// The result is canonical: host bits are cleared, and an IPv4-mapped IPv6 prefix of at least 96
// bits becomes the IPv4 prefix it covers, because clients are matched unmapped (core.ClientIP).
// Zoned addresses ("fe80::1%eth0") are refused: a zone names an interface of one host, not a
// range of clients. masked reports whether host bits were set ("10.1.2.3/8").
func ParseEntry(s string) (p netip.Prefix, masked bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Prefix{}, false, fmt.Errorf("empty entry")
	}
	if strings.Contains(s, "/") {
		p, err = netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, false, err
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, false, err
		}
		if a.Zone() != "" {
			return netip.Prefix{}, false, fmt.Errorf("%q: zoned addresses are not client ranges", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	m := p.Masked()
	return m, m != p, nil
}

// Invalid is a list entry ParseList skipped.
type Invalid struct {
	Index int
	Entry string
	Err   error
}

// ParseList parses every entry of list, returning the valid ones in list order (canonical, see
// ParseEntry), the invalid ones, and the indexes of the entries that had host bits set.
func ParseList(list []string) (ps []netip.Prefix, bad []Invalid, masked []int) {
	ps = make([]netip.Prefix, 0, len(list))
	for i, s := range list {
		p, m, err := ParseEntry(s)
		if err != nil {
			bad = append(bad, Invalid{Index: i, Entry: s, Err: err})
			continue
		}
		if m {
			masked = append(masked, i)
		}
		ps = append(ps, p)
	}
	return ps, bad, masked
}

// u128 is an address as a 128-bit number (IPv4 in the low 32 bits).
type u128 struct{ hi, lo uint64 }

func (u u128) less(v u128) bool { return u.hi < v.hi || (u.hi == v.hi && u.lo < v.lo) }

func (u u128) cmp(v u128) int {
	if c := cmp.Compare(u.hi, v.hi); c != 0 {
		return c
	}
	return cmp.Compare(u.lo, v.lo)
}

func (u u128) next() (u128, bool) {
	if u.lo != ^uint64(0) {
		return u128{u.hi, u.lo + 1}, true
	}
	if u.hi != ^uint64(0) {
		return u128{u.hi + 1, 0}, true
	}
	return u, false
}

func number(a netip.Addr) u128 {
	if a.Is4() {
		b := a.As4()
		return u128{0, uint64(binary.BigEndian.Uint32(b[:]))}
	}
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// span is an inclusive range of addresses.
type span struct{ first, last u128 }

// spanOf is the range of a canonical prefix.
func spanOf(p netip.Prefix) span {
	first := number(p.Addr())
	host := p.Addr().BitLen() - p.Bits() // bits left to the host part
	last := first
	switch {
	case host >= 128:
		last = u128{^uint64(0), ^uint64(0)}
	case host > 64:
		last = u128{first.hi | (1<<(host-64) - 1), ^uint64(0)}
	case host == 64:
		last.lo = ^uint64(0)
	case host > 0:
		last.lo |= 1<<host - 1
	}
	return span{first, last}
}

// Set is a set of addresses made of prefixes: per family, the prefixes' ranges sorted and merged
// (overlapping and adjacent ones fused), so a lookup is one binary search, O(log n) in the
// number of ranges, and allocates nothing. IPv4 and IPv6 are apart: an IPv4 client is never in
// an IPv6 range (mapped addresses are unmapped by ParseEntry and by core.ClientIP).
type Set struct {
	v4, v6 []span
}

// NewSet builds the set of ps (canonical prefixes, as ParseList returns them).
func NewSet(ps []netip.Prefix) *Set {
	s := &Set{}
	for _, p := range ps {
		if p.Addr().Is4() {
			s.v4 = append(s.v4, spanOf(p))
		} else {
			s.v6 = append(s.v6, spanOf(p))
		}
	}
	s.v4, s.v6 = merge(s.v4), merge(s.v6)
	return s
}

func merge(ss []span) []span {
	if len(ss) == 0 {
		return nil
	}
	slices.SortFunc(ss, func(a, b span) int { return a.first.cmp(b.first) })
	out := ss[:1]
	for _, s := range ss[1:] {
		cur := &out[len(out)-1]
		after, ok := cur.last.next()
		if !ok || !after.less(s.first) { // s starts within cur or right after it
			if cur.last.less(s.last) {
				cur.last = s.last
			}
			continue
		}
		out = append(out, s)
	}
	return slices.Clip(out)
}

// Contains reports whether a is in the set; an IPv4-mapped address is looked up as IPv4.
func (s *Set) Contains(a netip.Addr) bool {
	switch {
	case a.Is4():
		return find(s.v4, number(a))
	case a.Is4In6():
		return find(s.v4, number(a.Unmap()))
	case a.Is6():
		return find(s.v6, number(a))
	}
	return false
}

// Len is the number of merged ranges, IPv4 and IPv6.
func (s *Set) Len() int { return len(s.v4) + len(s.v6) }

// find reports whether x is in one of the sorted, disjoint ranges ss.
func find(ss []span, x u128) bool {
	// i is the first range starting after x; the one before it is the only candidate.
	i, j := 0, len(ss)
	for i < j {
		h := int(uint(i+j) >> 1)
		if x.less(ss[h].first) {
			j = h
		} else {
			i = h + 1
		}
	}
	return i > 0 && !ss[i-1].last.less(x)
}
