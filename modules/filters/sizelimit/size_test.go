package sizelimit

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	ok := map[string]int64{
		"0": 0, "1048576": 1 << 20, "512K": 512 << 10, "512k": 512 << 10, "10m": 10 << 20, "10M": 10 << 20,
		"1g": 1 << 30, "2Gi": 2 << 30, "3mib": 3 << 20, "4KiB": 4 << 10, "7b": 7, " 10 m ": 10 << 20,
		"8589934591g": 8589934591 << 30, "9223372036854775807": 1<<63 - 1,
	}
	for in, want := range ok {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]string{
		"": "want a number", "m": "want a number", "-1": "want a number", "+5": "want a number", "1.5m": "unknown unit",
		"10kb": "ambiguous", "10MB": "ambiguous", "1t": "unknown unit", "10 x": "unknown unit", "0x10": "unknown unit",
		"8589934592g": "too large", "9223372036854775808": "too large", "1m1": "unknown unit",
	}
	for in, want := range bad {
		if got, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSize(%q) = %d, %v; want an error containing %q", in, got, err, want)
		}
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 100: "100", 1024: "1k", 1536 << 10: "1536k", 10 << 20: "10m", 3 << 30: "3g"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d)) = %d, %v", n, back, err)
		}
	}
}

// FuzzParseSize: the parser never panics; what it accepts is non-negative, is what the digits
// times the unit say (checked by re-reading FormatSize's spelling of it), and a size it refuses
// has an error.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "1048576", "512K", "10m", "1Gi", "3MiB", " 7 b ", "10kb", "1.5m", "-1", "9223372036854775807", "8589934592g", "1m1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if n != 0 {
				t.Fatalf("ParseSize(%q) = %d with error %v", s, n, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		back, err := ParseSize(FormatSize(n))
		if err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d, but %q reads back as %d, %v", s, n, FormatSize(n), back, err)
		}
		// The value is the leading digits times the unit: "<digits>" alone reads as at most n.
		digits := strings.TrimSpace(s)
		i := 0
		for i < len(digits) && digits[i] >= '0' && digits[i] <= '9' {
			i++
		}
		plain, err := ParseSize(digits[:i])
		if err != nil || plain > n || (plain == 0) != (n == 0) || (plain != 0 && n%plain != 0) {
			t.Fatalf("ParseSize(%q) = %d, its digits %q read %d, %v", s, n, digits[:i], plain, err)
		}
	})
}
