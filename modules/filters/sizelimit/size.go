package sizelimit

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// units are the accepted suffixes, lower case, and their multipliers. All binary.
var units = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30,
}

// ParseSize reads a size: decimal digits, optional spaces, an optional binary unit (see
// Config.MaxSize), surrounding spaces ignored. It refuses signs, fractions, unknown or ambiguous
// units ("kb") and values beyond int64.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit k, m or g", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	unit := strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := units[unit]
	if !ok {
		if unit == "kb" || unit == "mb" || unit == "gb" {
			return 0, fmt.Errorf("size %q: unit %q is ambiguous; write %c (binary, %d bytes) or a number of bytes",
				s, t[i:], unit[0], units[unit[:1]])
		}
		return 0, fmt.Errorf("size %q: unknown unit %q (want k, m or g, binary)", s, strings.TrimSpace(t[i:]))
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// FormatSize writes n in the largest unit that divides it exactly ("10m", "1536k", "100").
func FormatSize(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
