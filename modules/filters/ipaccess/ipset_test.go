package ipaccess

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func TestParseEntry(t *testing.T) {
	tests := []struct {
		in, want string
		masked   bool
	}{
		{"10.0.0.0/8", "10.0.0.0/8", false},
		{" 192.0.2.7 ", "192.0.2.7/32", false},
		{"10.1.2.3/8", "10.0.0.0/8", true},
		{"0.0.0.0/0", "0.0.0.0/0", false},
		{"2001:db8::/32", "2001:db8::/32", false},
		{"2001:DB8::1", "2001:db8::1/128", false},
		{"::/0", "::/0", false},
		{"::ffff:192.0.2.0/120", "192.0.2.0/24", false},
		{"::ffff:192.0.2.9", "192.0.2.9/32", false},
		{"::ffff:0:0/96", "0.0.0.0/0", false},
		{"2001:db8::1/64", "2001:db8::/64", true},
	}
	for _, tt := range tests {
		p, masked, err := ParseEntry(tt.in)
		if err != nil || p.String() != tt.want || masked != tt.masked {
			t.Errorf("ParseEntry(%q) = %v, %v, %v; want %s, %v", tt.in, p, masked, err, tt.want, tt.masked)
		}
	}
	for _, in := range []string{"", " ", "10.0.0.0/33", "10.0.0", "300.1.1.1", "example.com", "fe80::1%eth0",
		"10.0.0.0/8/8", "2001:db8::/129", "10.0.0.0/-1", "010.0.0.1", "1.2.3.4/ 8"} {
		if p, _, err := ParseEntry(in); err == nil {
			t.Errorf("ParseEntry(%q) = %v, want an error", in, p)
		}
	}
}

func TestSet(t *testing.T) {
	ps, bad, _ := ParseList([]string{"10.0.0.0/8", "10.2.0.0/16", "11.0.0.0/8", "192.0.2.7", "2001:db8::/32",
		"2001:db8:1::/48", "::1", "255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", "junk"})
	if len(bad) != 1 || bad[0].Index != 9 {
		t.Fatalf("bad = %+v, want entry 9", bad)
	}
	s := NewSet(ps)
	// 10/8 and 11/8 are adjacent and merge; 10.2/16 is inside them.
	if s.Len() != 6 {
		t.Errorf("Len = %d, want 6 merged ranges (%+v %+v)", s.Len(), s.v4, s.v6)
	}
	for addr, want := range map[string]bool{
		"10.0.0.0": true, "10.255.255.255": true, "11.255.255.255": true, "12.0.0.0": false, "9.255.255.255": false,
		"192.0.2.7": true, "192.0.2.6": false, "192.0.2.8": false, "255.255.255.255": true, "0.0.0.0": false,
		"::ffff:10.1.1.1": true, "::ffff:12.0.0.1": false, "::a01:101": false, // ::10.1.1.1 is IPv6, not IPv4
		"2001:db8::": true, "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff": true, "2001:db9::": false, "2001:db7::": false,
		"::1": true, "::2": false, "::": false, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff": true,
	} {
		if got := s.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", addr, got, want)
		}
	}
	if s.Contains(netip.Addr{}) {
		t.Error("the zero Addr is in the set")
	}
	if (&Set{}).Contains(netip.MustParseAddr("1.2.3.4")) || NewSet(nil).Contains(netip.MustParseAddr("::1")) {
		t.Error("an empty set contains something")
	}
	all := NewSet([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")})
	for _, a := range []string{"0.0.0.0", "255.255.255.255", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "8000::"} {
		if !all.Contains(netip.MustParseAddr(a)) {
			t.Errorf("/0 sets lack %s", a)
		}
	}
}

// TestSetAgreesWithScan: random prefixes of every length, compared with the naive scan.
func TestSetAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		ps := make([]netip.Prefix, rng.IntN(40))
		for i := range ps {
			ps[i] = randomPrefix(rng)
		}
		s := NewSet(ps)
		for range 500 {
			a := randomAddr(rng)
			if rng.IntN(2) == 0 && len(ps) > 0 { // near a boundary of a listed range
				sp := spanOf(ps[rng.IntN(len(ps))])
				a = addrOf(sp.first, ps[0].Addr().Is4() && rng.IntN(2) == 0)
			}
			if got, want := s.Contains(a), scan(ps, a); got != want {
				t.Fatalf("round %d: Contains(%s) = %v, scan says %v; prefixes %v", round, a, got, want, ps)
			}
		}
	}
}

func scan(ps []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func randomAddr(rng *rand.Rand) netip.Addr {
	if rng.IntN(2) == 0 {
		var b [4]byte
		for i := range b {
			b[i] = byte(rng.IntN(4)) // a small space, so ranges overlap and addresses hit them
		}
		return netip.AddrFrom4(b)
	}
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.IntN(3))
	}
	return netip.AddrFrom16(b)
}

func randomPrefix(rng *rand.Rand) netip.Prefix {
	a := randomAddr(rng)
	p, _ := a.Prefix(rng.IntN(a.BitLen() + 1))
	return p
}

func addrOf(u u128, v4 bool) netip.Addr {
	if v4 && u.hi == 0 && u.lo <= 0xffffffff {
		return netip.AddrFrom4([4]byte{byte(u.lo >> 24), byte(u.lo >> 16), byte(u.lo >> 8), byte(u.lo)})
	}
	var b [16]byte
	for i := range 8 {
		b[i] = byte(u.hi >> (56 - 8*i))
		b[8+i] = byte(u.lo >> (56 - 8*i))
	}
	return netip.AddrFrom16(b)
}

// FuzzParseList: the list parser never panics; every entry it accepts round-trips through its
// canonical form; and the compiled Set agrees with a naive Prefix.Contains scan of the parsed
// prefixes, for an address taken from the input.
func FuzzParseList(f *testing.F) {
	f.Add("10.0.0.0/8,192.0.2.7,2001:db8::/32", []byte{10, 1, 2, 3})
	f.Add("::ffff:192.0.2.0/120, 10.1.2.3/8 ,junk,", []byte{192, 0, 2, 9})
	f.Add("0.0.0.0/0,::/0", make([]byte, 16))
	f.Add("fe80::1%eth0,1.2.3.4/33,::1", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, list string, addr []byte) {
		entries := strings.Split(list, ",")
		ps, bad, _ := ParseList(entries)
		if len(ps)+len(bad) != len(entries) {
			t.Fatalf("%d valid + %d invalid of %d entries", len(ps), len(bad), len(entries))
		}
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() || p.Addr().Zone() != "" {
				t.Fatalf("accepted %v, which is not canonical", p)
			}
			back, masked, err := ParseEntry(p.String())
			if err != nil || back != p || masked {
				t.Fatalf("%v does not round-trip: %v %v %v", p, back, masked, err)
			}
		}
		var a netip.Addr
		switch len(addr) {
		case 4:
			a = netip.AddrFrom4([4]byte(addr))
		case 16:
			a = netip.AddrFrom16([16]byte(addr))
		default:
			return
		}
		s := NewSet(ps)
		if got, want := s.Contains(a), scan(ps, a); got != want {
			t.Fatalf("Contains(%s) = %v, scan of %v says %v", a, got, ps, want)
		}
		for _, p := range ps { // every listed range's ends are in the set
			sp := spanOf(p)
			if first := addrOf(sp.first, p.Addr().Is4()); !s.Contains(first) {
				t.Fatalf("%v: its first address %s is not in the set", p, first)
			}
			if last := addrOf(sp.last, p.Addr().Is4()); !s.Contains(last) {
				t.Fatalf("%v: its last address %s is not in the set", p, last)
			}
		}
	})
}

// cidrs makes n distinct, non-adjacent prefixes of the family, spread over its space, so that n
// entries stay n ranges after merging.
func cidrs(n int, v6 bool) []string {
	out := make([]string, n)
	for i := range n {
		if v6 {
			out[i] = fmt.Sprintf("2001:db8:%x:%x::/64", i>>8, (i&0xff)<<4)
		} else {
			out[i] = fmt.Sprintf("%d.%d.%d.0/24", 10+i>>14&0x3f, i>>6&0xff, i&0x3f<<2)
		}
	}
	return out
}

func TestCIDRsDoNotMerge(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		ps, bad, _ := ParseList(cidrs(10000, v6))
		if len(bad) > 0 {
			t.Fatalf("v6=%v: %v", v6, bad[0])
		}
		if n := NewSet(ps).Len(); n != 10000 {
			t.Errorf("v6=%v: %d ranges, want 10000", v6, n)
		}
	}
}

// BenchmarkIPAccess is the per-request cost of the lookup (Allowed: the deny list, then the allow
// list) with 10 and 10,000 CIDRs on the allow list, for a client in the middle of it (allowed)
// and one outside (refused).
func BenchmarkIPAccess(b *testing.B) {
	for _, fam := range []struct {
		name     string
		v6       bool
		in, miss string
	}{
		{"v4", false, "10.0.4.77", "172.16.0.1"},
		{"v6", true, "2001:db8:0:10::1", "2001:db9::1"},
	} {
		for _, n := range []int{10, 10000} {
			f := &IpAccessControl{Config: Config{Allow: cidrs(n, fam.v6), Deny: []string{"192.0.2.0/24", "2001:db8:ffff::/48"}}}
			if err := f.Provision(nil); err != nil {
				b.Fatal(err)
			}
			in, miss := netip.MustParseAddr(fam.in), netip.MustParseAddr(fam.miss)
			if !f.Allowed(in) || f.Allowed(miss) {
				b.Fatalf("%s/%d: %s allowed %v, %s allowed %v", fam.name, n, in, f.Allowed(in), miss, f.Allowed(miss))
			}
			b.Run(fmt.Sprintf("%s/%d/allowed", fam.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					f.Allowed(in)
				}
			})
			b.Run(fmt.Sprintf("%s/%d/refused", fam.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					f.Allowed(miss)
				}
			})
		}
	}
}
