package translate

import (
	"math"
	"regexp"
	"strconv"
	"testing"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// FuzzParseDuration checks the Gateway API Duration parser against the GEP-2257 grammar worked out
// by hand: it accepts exactly 1 to 4 groups of 1 to 5 digits and a unit (h, m, s, ms), and their
// sum in milliseconds (capped at the IR's uint32).
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"0s", "1h", "1h30m", "500ms", "99999h", "1h1m1s1ms", "1.5s", "1s1s1s1s1s", "-1s", "1d", "", "01s"} {
		f.Add(s)
	}
	group := regexp.MustCompile(`([0-9]{1,5})(ms|h|m|s)`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseDuration(gwapiv1.Duration(s))
		var want uint64
		ok := s != ""
		rest := s
		n := 0
		for ok && rest != "" {
			loc := group.FindStringSubmatchIndex(rest)
			if loc == nil || loc[0] != 0 {
				ok = false
				break
			}
			// "ms" is tried before "m", so that "1ms" is not 1m and a stray "s".
			unit := rest[loc[4]:loc[5]]
			v, _ := strconv.ParseUint(rest[loc[2]:loc[3]], 10, 64)
			want += v * map[string]uint64{"h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}[unit]
			rest = rest[loc[1]:]
			n++
		}
		ok = ok && n >= 1 && n <= 4
		if ok != (err == nil) {
			t.Fatalf("%q: error %v, want accepted=%v", s, err, ok)
		}
		if ok && uint64(got) != min(want, math.MaxUint32) {
			t.Fatalf("%q: %d ms, want %d", s, got, want)
		}
	})
}
