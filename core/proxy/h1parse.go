package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// h1Head is an upstream response header as the HTTP/1.1 forwarder parsed it. Field names and
// values are offsets into raw, a copy of the header block that becomes one string when the fields
// are copied into the client's response header (one allocation for all of them).
type h1Head struct {
	status  int
	minor   int   // HTTP/1.<minor>
	length  int64 // Content-Length, -1 when absent
	chunked bool
	close   bool  // the connection cannot carry another request
	conn    []int // indexes in fields of the Connection header fields
	raw     []byte
	fields  []h1Field
	trailer bool // fields are trailers (no framing headers, no status line)
}

type h1Field struct{ k0, k1, v0, v1 int32 }

// Errors an upstream response is rejected with: the forwarder answers 502 and closes the
// connection, since the framing of what follows cannot be trusted.
var (
	errH1Malformed   = errors.New("malformed upstream response header")
	errH1TooLarge    = errors.New("upstream response header too large")
	errH1Framing     = errors.New("upstream response has conflicting or unsupported framing")
	errH1NothingRead = errors.New("upstream closed the connection before answering")
)

const maxH1Head = 64 << 10

func (h *h1Head) reset() {
	*h = h1Head{raw: h.raw[:0], fields: h.fields[:0], conn: h.conn[:0], length: -1}
}

// readLine reads one line (without its CRLF or LF) and appends it to h.raw, returning its offsets.
// A header line longer than the reader's buffer is still read, in pieces.
func (h *h1Head) readLine(br *bufio.Reader) (int, int, error) {
	start := len(h.raw)
	for {
		frag, err := br.ReadSlice('\n')
		if len(h.raw)+len(frag) > maxH1Head {
			return 0, 0, errH1TooLarge
		}
		h.raw = append(h.raw, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(h.raw) == start && (errors.Is(err, io.EOF) || isConnReset(err)) {
				return 0, 0, errH1NothingRead
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, 0, err
		}
	}
	end := len(h.raw) - 1 // the '\n'
	if end > start && h.raw[end-1] == '\r' {
		end--
	}
	return start, end, nil
}

// readStatus reads the status line: "HTTP/1.x SP 3DIGIT [SP reason]".
func (h *h1Head) readStatus(br *bufio.Reader) error {
	s, e, err := h.readLine(br)
	if err != nil {
		return err
	}
	line := h.raw[s:e]
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return errH1Malformed
	}
	switch line[7] {
	case '0':
		h.minor = 0
	case '1':
		h.minor = 1
	default:
		return errH1Malformed
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return errH1Malformed
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return errH1Malformed
	}
	for _, c := range line[min(len(line), 13):] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return errH1Malformed
		}
	}
	h.status = code
	h.raw = h.raw[:0] // the status line is not needed any more
	return nil
}

// readFields reads header (or trailer) fields up to the empty line, validating each and applying
// the framing headers.
func (h *h1Head) readFields(br *bufio.Reader) error {
	for {
		s, e, err := h.readLine(br)
		if err != nil {
			if errors.Is(err, errH1NothingRead) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if s == e {
			h.raw = h.raw[:s]
			return nil
		}
		f, err := parseField(h.raw, s, e)
		if err != nil {
			return err
		}
		if err := h.framing(f); err != nil {
			return err
		}
		h.fields = append(h.fields, f)
	}
}

// parseField splits "name: value" in raw[s:e]. It rejects obs-fold (a line starting with white
// space), white space before the colon, a name that is not a token and control characters in the
// value (RFC 9112 §5, the checks that stop response splitting and smuggling).
func parseField(raw []byte, s, e int) (h1Field, error) {
	line := raw[s:e]
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 {
		return h1Field{}, errH1Malformed
	}
	for _, c := range line[:colon] {
		if !isTokenByte(c) {
			return h1Field{}, errH1Malformed
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
			return h1Field{}, errH1Malformed
		}
	}
	canonicalize(line[:colon])
	return h1Field{k0: int32(s), k1: int32(s + colon), v0: int32(s + v0), v1: int32(s + v1)}, nil
}

// framing applies Content-Length, Transfer-Encoding and Connection. Content-Length must be digits
// only and, if repeated, identical; Transfer-Encoding must be exactly "chunked" on HTTP/1.1; the two
// together are refused (RFC 9112 §6.3: a sign of smuggling; an intermediary must not forward it).
func (h *h1Head) framing(f h1Field) error {
	name, value := h.raw[f.k0:f.k1], h.raw[f.v0:f.v1]
	if h.trailer {
		if string(name) == "Content-Length" || string(name) == "Transfer-Encoding" || string(name) == "Host" {
			return errH1Framing
		}
		return nil
	}
	switch string(name) {
	case "Content-Length":
		n, ok := parseLength(value)
		if !ok || (h.length >= 0 && n != h.length) || h.chunked {
			return errH1Framing
		}
		h.length = n
	case "Transfer-Encoding":
		if h.minor == 0 || h.chunked || h.length >= 0 || !bytes.EqualFold(value, []byte("chunked")) {
			return errH1Framing
		}
		h.chunked = true
	case "Connection":
		h.conn = append(h.conn, len(h.fields))
		if hasToken(value, "close") {
			h.close = true
		}
	}
	return nil
}

// read reads a whole response header, skipping interim (1xx) responses, which the forwarder does
// not relay. 101 is an error: the fast path never asks for an upgrade.
func (h *h1Head) read(br *bufio.Reader) error {
	for {
		h.reset()
		if err := h.readStatus(br); err != nil {
			return err
		}
		if err := h.readFields(br); err != nil {
			return err
		}
		switch {
		case h.status == http.StatusSwitchingProtocols:
			return fmt.Errorf("%w: unexpected 101", errH1Framing)
		case h.status < 200:
			continue
		}
		if h.minor == 0 && !h.keepAlive10() {
			h.close = true
		}
		return nil
	}
}

// keepAlive10 reports whether an HTTP/1.0 response asked to keep the connection.
func (h *h1Head) keepAlive10() bool {
	for _, i := range h.conn {
		f := h.fields[i]
		if hasToken(h.raw[f.v0:f.v1], "keep-alive") {
			return true
		}
	}
	return false
}

// bodyless reports whether the response has no body whatever its headers say.
func (h *h1Head) bodyless(method string) bool {
	return method == http.MethodHead || h.status == http.StatusNoContent || h.status == http.StatusNotModified ||
		h.status < 200
}

// parseLength parses a Content-Length value: 1 to 18 digits.
func parseLength(b []byte) (int64, bool) {
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

// hasToken reports whether the comma-separated list v holds token (ASCII case-insensitive).
func hasToken(v []byte, token string) bool {
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

// canonicalize turns a header name into its canonical MIME form in place ("content-type" →
// "Content-Type"), so the name becomes a map key without textproto allocating a copy.
func canonicalize(b []byte) {
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

// isTokenByte reports whether c is an RFC 9110 tchar.
func isTokenByte(c byte) bool {
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
