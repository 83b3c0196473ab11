package grpcroute

import (
	"math"
	"net/http"
	"time"
)

// RequestTimeout implements core.HTTPDeadliner: the client's deadline, from the grpc-timeout
// request header, so the engine bounds the call by it. Without it a backend that gives up at the
// deadline (grpc-go resets the stream with CANCEL) would race the client's own timer, and the
// client could be told UNAVAILABLE (the engine's 502) instead of DEADLINE_EXCEEDED. A malformed
// header bounds nothing here; the backend rejects the call itself.
func (*Matcher) RequestTimeout(r *http.Request) (time.Duration, bool) {
	v := r.Header["Grpc-Timeout"]
	if len(v) == 0 {
		return 0, false
	}
	return ParseTimeout(v[0])
}

// ParseTimeout parses a grpc-timeout value: at most 8 ASCII digits and a unit, H, M, S, m, u or
// n (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md). It does not allocate.
func ParseTimeout(s string) (time.Duration, bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	var n int64
	for i := 0; i < len(s)-1; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > math.MaxInt64/int64(unit) {
		return math.MaxInt64, true // 99999999H is beyond any time.Duration: no practical bound
	}
	return time.Duration(n) * unit, true
}
