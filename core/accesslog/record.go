package accesslog

import (
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// Kind is what a line describes; it is the line's msg.
type Kind uint8

const (
	// KindRequest is an HTTP request (msg "request"), a mirrored copy too (Mirror set).
	KindRequest Kind = iota
	// KindConnection is a TCPRoute or TLSRoute connection, logged when it ends (msg "connection").
	KindConnection
	// KindSession is a UDPRoute client session, logged when it ends (msg "session").
	KindSession
)

var kindMessages = [...]string{KindRequest: "request", KindConnection: "connection", KindSession: "session"}

// Record is one line's fields, captured on the request's (or connection's) goroutine and encoded
// by the writer. It holds no pointer of its own making: its strings are those the request, the
// route and the table already hold (immutable, so the writer may read them after the request
// has ended and its connection moved on), and everything else is a value. Empty strings and zero
// values are left out of the line, as docs/observability.md lists.
type Record struct {
	Kind Kind
	// Time is when the request was dispatched (the connection accepted, the session opened).
	Time     time.Time
	Listener string
	Gateway  string
	Route    string
	Rule     string // the route rule's name
	Backend  string // the cluster
	Upstream string // the endpoint, "address:port"
	Method   string
	Host     string
	Path     string
	Query    string // written only by a Logger with Options.Query
	Protocol string
	// Status is the response status (requests only; a mirror that got no answer has 0: left out).
	Status  int
	Aborted bool
	Mirror  bool
	// BytesIn and BytesOut: a request's declared body length and its response body bytes; a
	// connection's or session's bytes from and to the client.
	BytesIn, BytesOut int64
	Duration          time.Duration
	// UpstreamDuration is written when Upstream is set (requests only).
	UpstreamDuration time.Duration
	// ClientIP is the client as resolved (PROXY protocol, trusted X-Forwarded-For, a client_ip
	// filter); PeerIP the socket's peer, which differs from it behind a proxy or load balancer.
	ClientIP  netip.Addr
	PeerIP    netip.Addr
	TLSSNI    string
	RequestID string
	// Error says why a mirrored copy got no answer.
	Error string
}

// appendRecord appends r as one JSON line, byte for byte what zap's JSON encoder (the process
// log's, with time key "time", message key "msg", RFC 3339 nanosecond times, seconds as float
// durations) writes for the same fields in the same order: the tests hold it to that. clock
// formats the time (time.RFC3339Nano, from its cached second).
func appendRecord(b []byte, r *Record, query bool, clock *stampCache) []byte {
	b = append(b, `{"time":"`...)
	b = clock.appendTime(b, r.Time)
	b = append(b, `","msg":"`...)
	b = append(b, kindMessages[r.Kind]...)
	b = append(b, '"')
	m := &clock.plain
	b = m.appendString(b, memoListener, "listener", r.Listener)
	b = m.appendString(b, memoGateway, "gateway", r.Gateway)
	b = m.appendString(b, memoRoute, "route", r.Route)
	b = m.appendString(b, memoRule, "rule", r.Rule)
	b = m.appendString(b, memoBackend, "backend", r.Backend)
	b = m.appendString(b, memoUpstream, "upstream", r.Upstream)
	if r.Mirror {
		b = append(b, `,"mirror":true`...)
	}
	if r.Kind == KindRequest {
		b = appendString(b, "method", r.Method)
		b = appendString(b, "host", r.Host)
		b = appendString(b, "path", r.Path)
		if query {
			b = appendString(b, "query", r.Query)
		}
		b = appendString(b, "protocol", r.Protocol)
		if r.Status != 0 {
			b = appendInt(b, "status", int64(r.Status))
		}
		if r.Aborted {
			b = append(b, `,"aborted":true`...)
		}
	}
	b = appendInt(b, "bytes_in", r.BytesIn)
	b = appendInt(b, "bytes_out", r.BytesOut)
	b = appendSeconds(b, "duration", r.Duration)
	if r.Kind == KindRequest && r.Upstream != "" {
		b = appendSeconds(b, "upstream_duration", r.UpstreamDuration)
	}
	b = appendAddr(b, "client_ip", r.ClientIP)
	b = appendAddr(b, "peer_ip", r.PeerIP)
	b = appendString(b, "tls_sni", r.TLSSNI)
	b = appendString(b, "request_id", r.RequestID)
	b = appendString(b, "error", r.Error)
	return append(b, "}\n"...)
}

// appendAddr appends `,"key":"address"`; an invalid address is left out.
func appendAddr(b []byte, key string, a netip.Addr) []byte {
	if !a.IsValid() {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":"`...)
	start := len(b)
	b = a.AppendTo(b)
	if needsEscape(b[start:]) { // only an IPv6 zone (an interface name) could
		ip := string(b[start:])
		b = appendEscaped(b[:start], ip)
	}
	return append(b, '"')
}

// appendString appends `,"key":"value"` with value escaped as zap escapes it; an empty value is
// left out. Keys are constants that need no escaping.
func appendString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":"`...)
	b = appendEscaped(b, v)
	return append(b, '"')
}

// plainMemo remembers, for each of the fields the requests of one route share (their strings are
// the table's: the same bytes at the same address line after line), the last value found to need
// no escaping, so that the writer appends it again without scanning it. A value is taken for the
// remembered one only if it has the same address and length; the memo holds the string, so its
// memory cannot be freed and reused for other bytes while it is remembered.
type plainMemo [memoFields]string

const (
	memoListener = iota
	memoGateway
	memoRoute
	memoRule
	memoBackend
	memoUpstream
	memoFields
)

// appendString is appendString for field i.
func (m *plainMemo) appendString(b []byte, i int, key, v string) []byte {
	if v == "" {
		return b
	}
	if len(v) != len(m[i]) || unsafe.StringData(v) != unsafe.StringData(m[i]) {
		if plainASCII(v) != len(v) {
			return appendString(b, key, v)
		}
		m[i] = v
	}
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":"`...)
	b = append(b, v...)
	return append(b, '"')
}

func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, v, 10)
}

// appendSeconds is zap's SecondsDurationEncoder: the duration in seconds as the shortest float
// (strconv 'f', -1). Below 10^15 ns (11 days) that is the exact decimal of d's nanoseconds: a
// decimal of at most 15 significant digits is the shortest one that reads back as its float64
// (DBL_DIG), so the integer arithmetic writes the same digits without the float formatting.
func appendSeconds(b []byte, key string, d time.Duration) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":`...)
	const exact = 1e15
	if d <= -exact || d >= exact {
		return strconv.AppendFloat(b, float64(d)/float64(time.Second), 'f', -1, 64)
	}
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	b = strconv.AppendInt(b, int64(d/time.Second), 10)
	if ns := int(d % time.Second); ns != 0 {
		b = appendFraction(b, ns)
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendEscaped is zap's JSON string escaping (zapcore's safeAppendStringLike): quotes,
// backslashes and control characters escaped (\n, \r, \t by name, the others as \u00XX), each
// byte of invalid UTF-8 replaced by \ufffd, everything else as it is. Runs of plain ASCII (all
// of a typical line) are found eight bytes at a time and appended in one copy.
func appendEscaped(b []byte, s string) []byte {
	last := 0
	for i := 0; i < len(s); {
		i += plainASCII(s[i:])
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[last:i]...)
			b = append(b, `\ufffd`...)
			i++
			last = i
			continue
		}
		if c >= 0x20 && c != '\\' && c != '"' {
			i++
			continue
		}
		b = append(b, s[last:i]...)
		switch c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		last = i
	}
	return append(b, s[last:]...)
}

// plainASCII is the length of s's leading run of bytes JSON takes as they are (0x20–0x7f but
// the quote and the backslash), tested a word at a time: a byte of a word is flagged when it
// is below 0x20, equal to '"' or '\\', or has its high bit set (SWAR, "determine if a word has
// a byte less than n" from Bit Twiddling Hacks).
func plainASCII(s string) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		quote, backslash := w^(ones*'"'), w^(ones*'\\')
		flagged := ((w - ones*0x20) | (quote-ones)&^quote | (backslash-ones)&^backslash | w) & highs
		if flagged != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			break
		}
	}
	return i
}

func needsEscape(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '\\' || c == '"' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
