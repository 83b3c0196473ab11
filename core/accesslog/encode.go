package accesslog

import (
	"net/netip"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

// encoder turns records into lines, byte for byte what zap's JSON encoder (the process log's,
// with time key "time", message key "msg", RFC 3339 nanosecond times, seconds as float
// durations) writes for the same fields in the same order: the tests hold it to that. It
// belongs to one goroutine, the Logger's writer, and keeps what lines share between them: the
// formatted second of the time field and the encoded fields of the routes seen last.
//
// A line is some thirty appends; each field's key is appended together with its punctuation
// (`,"method":"`), which halves them, since appending a short string costs a call to memmove
// whatever its length.
type encoder struct {
	query   bool // write the query field
	clock   stampCache
	origins originCache
	peers   peerCache
}

// msgFields close the time field and write the msg, per Kind.
var msgFields = [...]string{KindRequest: `","msg":"request"`, KindConnection: `","msg":"connection"`, KindSession: `","msg":"session"`}

// appendRecord appends r as one JSON line. Empty strings and zero values are left out, as
// docs/observability.md lists.
func (e *encoder) appendRecord(b []byte, r *Record) []byte {
	b = append(b, `{"time":"`...)
	b = e.clock.appendTime(b, r.Time)
	b = append(b, msgFields[r.Kind]...)
	b = e.origins.appendOrigin(b, r)
	b = appendString(b, `,"upstream":"`, r.Upstream)
	if r.Mirror {
		b = append(b, `,"mirror":true`...)
	}
	if r.Kind == KindRequest {
		b = appendString(b, `,"method":"`, r.Method)
		b = appendString(b, `,"host":"`, r.Host)
		b = appendString(b, `,"path":"`, r.Path)
		if e.query {
			b = appendString(b, `,"query":"`, r.Query)
		}
		b = appendString(b, `,"protocol":"`, r.Protocol)
		if r.Status != 0 {
			b = strconv.AppendInt(append(b, `,"status":`...), int64(r.Status), 10)
		}
		if r.Aborted {
			b = append(b, `,"aborted":true`...)
		}
	}
	b = strconv.AppendInt(append(b, `,"bytes_in":`...), r.BytesIn, 10)
	b = strconv.AppendInt(append(b, `,"bytes_out":`...), r.BytesOut, 10)
	b = appendSeconds(append(b, `,"duration":`...), r.Duration)
	if r.Kind == KindRequest && r.Upstream != "" {
		b = appendSeconds(append(b, `,"upstream_duration":`...), r.UpstreamDuration)
	}
	b = e.peers.appendPeers(b, r.ClientIP, r.PeerIP)
	b = appendString(b, `,"tls_sni":"`, r.TLSSNI)
	b = appendString(b, `,"request_id":"`, r.RequestID)
	b = appendString(b, `,"error":"`, r.Error)
	return append(b, "}\n"...)
}

// originCache holds, for the last routes seen, the encoded run of the fields a route's requests
// share: listener, gateway, route, rule and backend, adjacent in the line, about half of it.
// Their strings are the table's, the same bytes at the same address line after line, so a
// record whose five strings have the addresses and lengths of an entry's gets the entry's bytes
// in one copy instead of five fields escaped. An entry holds its strings, so their memory cannot
// be freed and reused for other bytes while it is remembered. The entries are indexed by the
// route's and the backend's addresses: a proxy serving many routes at once keeps several.
type originCache [originSlots]origin

const originSlots = 16

type origin struct {
	listener, gateway, route, rule, backend string
	enc                                     []byte
}

// appendOrigin appends r's listener, gateway, route, rule and backend fields.
func (c *originCache) appendOrigin(b []byte, r *Record) []byte {
	h := uintptr(unsafe.Pointer(unsafe.StringData(r.Route)))>>4 ^ uintptr(unsafe.Pointer(unsafe.StringData(r.Backend)))>>4
	o := &c[h%originSlots]
	if !same(o.route, r.Route) || !same(o.backend, r.Backend) || !same(o.listener, r.Listener) ||
		!same(o.gateway, r.Gateway) || !same(o.rule, r.Rule) {
		o.listener, o.gateway, o.route, o.rule, o.backend = r.Listener, r.Gateway, r.Route, r.Rule, r.Backend
		e := appendString(o.enc[:0], `,"listener":"`, r.Listener)
		e = appendString(e, `,"gateway":"`, r.Gateway)
		e = appendString(e, `,"route":"`, r.Route)
		e = appendString(e, `,"rule":"`, r.Rule)
		o.enc = appendString(e, `,"backend":"`, r.Backend)
	}
	return append(b, o.enc...)
}

// peerCache keeps the client_ip and peer_ip fields of the last line encoded: a connection's
// requests come one after another with the same addresses, and formatting two addresses is a
// tenth of a line's encoding.
type peerCache struct {
	client, peer netip.Addr
	enc          []byte
	valid        bool
}

// appendPeers appends the client_ip and peer_ip fields of client and peer.
func (c *peerCache) appendPeers(b []byte, client, peer netip.Addr) []byte {
	if !c.valid || c.client != client || c.peer != peer {
		c.client, c.peer, c.valid = client, peer, true
		c.enc = appendAddr(appendAddr(c.enc[:0], `,"client_ip":"`, client), `,"peer_ip":"`, peer)
	}
	return append(b, c.enc...)
}

// same reports whether a and b are the same string in memory: the same length at the same
// address (any two empty strings are).
func same(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}

// appendAddr appends prefix (`,"key":"`), a and the closing quote; an invalid address is left
// out.
func appendAddr(b []byte, prefix string, a netip.Addr) []byte {
	if !a.IsValid() {
		return b
	}
	b = append(b, prefix...)
	start := len(b)
	b = a.AppendTo(b)
	if !a.Is4() && needsEscape(b[start:]) { // only an IPv6 zone (an interface name) could
		ip := string(b[start:])
		b = appendEscaped(b[:start], ip)
	}
	return append(b, '"')
}

// appendString appends prefix (`,"key":"`), v escaped as zap escapes it, and the closing quote;
// an empty v is left out.
func appendString(b []byte, prefix, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, prefix...)
	b = appendEscaped(b, v)
	return append(b, '"')
}

// appendSeconds is zap's SecondsDurationEncoder: the duration in seconds as the shortest float
// (strconv 'f', -1). Below 10^15 ns (11 days) that is the exact decimal of d's nanoseconds: a
// decimal of at most 15 significant digits is the shortest one that reads back as its float64
// (DBL_DIG), so the integer arithmetic writes the same digits without the float formatting.
func appendSeconds(b []byte, d time.Duration) []byte {
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

// digitPairs is "00" to "99": two digits per division by 100 halve the dependent divisions of
// the nine a fraction needs.
const digitPairs = "00010203040506070809" + "10111213141516171819" + "20212223242526272829" +
	"30313233343536373839" + "40414243444546474849" + "50515253545556575859" + "60616263646566676869" +
	"70717273747576777879" + "80818283848586878889" + "90919293949596979899"

// appendFraction appends "." and ns (0 < ns < 1e9) as nine digits without the trailing zeros.
func appendFraction(b []byte, ns int) []byte {
	var d [10]byte
	d[0] = '.'
	u := uint32(ns)
	for i := 9; i > 1; i -= 2 {
		q := u / 100
		r := (u - q*100) * 2
		d[i-1], d[i] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	d[1] = byte('0' + u)
	n := 10
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
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
// a byte less than n" from Bit Twiddling Hacks). A string of eight bytes or more ends with a
// word that overlaps the one before it; a shorter one is looked up a byte at a time.
func plainASCII(s string) int {
	if len(s) < 8 {
		return plainBytes(s)
	}
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if !plainWord(s[i:]) {
			return i + plainBytes(s[i:i+8])
		}
	}
	if i == len(s) || plainWord(s[len(s)-8:]) {
		return len(s)
	}
	return i + plainBytes(s[i:])
}

// plainWord reports whether the first eight bytes of s are plain.
func plainWord(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	return ((w-ones*0x20)|(quote-ones)&^quote|(backslash-ones)&^backslash|w)&highs == 0
}

// plainBytes is the length of s's leading run of plain bytes, a byte at a time.
func plainBytes(s string) int {
	for i := range len(s) {
		if !plainByte[s[i]] {
			return i
		}
	}
	return len(s)
}

// plainByte is whether JSON takes a byte as it is.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func needsEscape(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '\\' || c == '"' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
