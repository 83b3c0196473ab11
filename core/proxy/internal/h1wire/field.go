package h1wire

import (
	"bufio"
	"bytes"
	"strings"
)

// Field is one "name: value" line of a header block: the offsets of its name (K0:K1) and value
// (V0:V1, without the white space around it) in the block's bytes.
type Field struct{ K0, K1, V0, V1 int32 }

// ParseField splits "name: value" in raw[s:e]. It rejects obs-fold (a line starting with white
// space), white space before the colon, a name that is not a token and control characters in the
// value (RFC 9112 §5, the checks that stop response splitting and smuggling).
func ParseField(raw []byte, s, e int) (Field, error) {
	line := raw[s:e]
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return Field{}, ErrMalformed
	}
	for _, c := range line[:colon] {
		if !IsTokenByte(c) {
			return Field{}, ErrMalformed
		}
	}
	v0, v1 := colon+1, len(line)
	for v0 < v1 && (line[v0] == ' ' || line[v0] == '\t') {
		v0++
	}
	for v1 > v0 && (line[v1-1] == ' ' || line[v1-1] == '\t') {
		v1--
	}
	for _, c := range line[v0:v1] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return Field{}, ErrMalformed
		}
	}
	Canonicalize(line[:colon])
	return Field{K0: int32(s), K1: int32(s + colon), V0: int32(s + v0), V1: int32(s + v1)}, nil
}

// ParseLength parses a Content-Length value: 1 to 18 digits.
func ParseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// HasToken reports whether the comma-separated list v holds token (ASCII case-insensitive).
func HasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var item []byte
		item, v, _ = bytes.Cut(v, []byte{','})
		item = bytes.Trim(item, " \t")
		if len(item) == len(token) && bytes.EqualFold(item, []byte(token)) {
			return true
		}
	}
	return false
}

// Canonicalize turns a header name into its canonical MIME form in place ("content-type" →
// "Content-Type"), so the name becomes a map key without textproto allocating a copy.
func Canonicalize(b []byte) {
	upper := true
	for i, c := range b {
		switch {
		case upper && 'a' <= c && c <= 'z':
			b[i] = c - ('a' - 'A')
		case !upper && 'A' <= c && c <= 'Z':
			b[i] = c + ('a' - 'A')
		}
		upper = c == '-'
	}
}

// IsTokenByte reports whether c is an RFC 9110 tchar.
func IsTokenByte(c byte) bool {
	return c < 0x80 && tokenTable[c]
}

var tokenTable = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// WriteValue writes a header value with any CR or LF replaced by a space, as net/http's
// Header.Write does: a value can never end the header early (request or response splitting).
func WriteValue(bw *bufio.Writer, v string) {
	if strings.IndexByte(v, '\r') < 0 && strings.IndexByte(v, '\n') < 0 {
		_, _ = bw.WriteString(v)
		return
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		_ = bw.WriteByte(c)
	}
}
