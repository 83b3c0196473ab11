package accesslog

import "time"

// stampCache formats the time field. time.Time.AppendFormat with RFC 3339 nanoseconds (what zap
// writes) redoes the calendar and zone arithmetic for every line, though a busy proxy logs
// thousands of lines within one second: the cache keeps the formatted second and zone of the
// last line, and a line of the same second and location appends them and its nanoseconds. It
// belongs to one goroutine (the Logger's writer, through its encoder).
type stampCache struct {
	sec    int64
	loc    *time.Location // nil until the first line
	second []byte         // "2006-01-02T15:04:05"
	zone   []byte         // "Z" or "-07:00"
}

// appendTime appends t as time.RFC3339Nano does: the fraction without its trailing zeros, and
// no fraction at all on a whole second. A zone's offset changes only on a whole second, so one
// second of one location always has the same zone.
func (c *stampCache) appendTime(b []byte, t time.Time) []byte {
	if sec, loc := t.Unix(), t.Location(); c.loc == nil || c.sec != sec || c.loc != loc {
		whole := t.Truncate(time.Second)
		c.sec, c.loc = sec, loc
		c.second = whole.AppendFormat(c.second[:0], "2006-01-02T15:04:05")
		c.zone = whole.AppendFormat(c.zone[:0], "Z07:00")
	}
	b = append(b, c.second...)
	if ns := t.Nanosecond(); ns != 0 {
		b = appendFraction(b, ns)
	}
	return append(b, c.zone...)
}
