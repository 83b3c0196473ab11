package h1wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
)

// Head is an upstream response header as the HTTP/1.1 forwarder parsed it. Field names and
// values are offsets into Raw, a copy of the header block that becomes one string when the fields
// are copied into the client's response header (one allocation for all of them: CopyFields).
type Head struct {
	Status  int
	Minor   int   // HTTP/1.<Minor>
	Length  int64 // Content-Length, -1 when absent
	Chunked bool
	Close   bool  // the connection cannot carry another request
	Conn    []int // indexes in Fields of the Connection header fields
	Raw     []byte
	Fields  []Field
	Trailer bool // Fields are trailers (no framing headers, no status line): set before ReadFields
}

// Errors an upstream response is rejected with: the forwarder answers 502 and closes the
// connection, since the framing of what follows cannot be trusted.
var (
	ErrMalformed   = errors.New("malformed upstream response header")
	ErrTooLarge    = errors.New("upstream response header too large")
	ErrFraming     = errors.New("upstream response has conflicting or unsupported framing")
	ErrNothingRead = errors.New("upstream closed the connection before answering")
)

const MaxHead = 64 << 10

func (h *Head) reset() {
	*h = Head{Raw: h.Raw[:0], Fields: h.Fields[:0], Conn: h.Conn[:0], Length: -1}
}

// readLine reads one line (without its CRLF or LF) and appends it to h.Raw, returning its offsets.
// A header line longer than the reader's buffer is still read, in pieces.
func (h *Head) readLine(br *bufio.Reader) (int, int, error) {
	start := len(h.Raw)
	for {
		frag, err := br.ReadSlice('\n')
		if len(h.Raw)+len(frag) > MaxHead {
			return 0, 0, ErrTooLarge
		}
		h.Raw = append(h.Raw, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(h.Raw) == start && (errors.Is(err, io.EOF) || isConnReset(err)) {
				return 0, 0, ErrNothingRead
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, 0, err
		}
	}
	end := len(h.Raw) - 1 // the '\n'
	if end > start && h.Raw[end-1] == '\r' {
		end--
	}
	return start, end, nil
}

// readStatus reads the status line: "HTTP/1.x SP 3DIGIT [SP reason]".
func (h *Head) readStatus(br *bufio.Reader) error {
	s, e, err := h.readLine(br)
	if err != nil {
		return err
	}
	line := h.Raw[s:e]
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return ErrMalformed
	}
	switch line[7] {
	case '0':
		h.Minor = 0
	case '1':
		h.Minor = 1
	default:
		return ErrMalformed
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return ErrMalformed
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return ErrMalformed
	}
	for _, c := range line[min(len(line), 13):] {
		if c < ' ' && c != '\t' || c == 0x7f {
			return ErrMalformed
		}
	}
	h.Status = code
	h.Raw = h.Raw[:0] // the status line is not needed any more
	return nil
}

// ReadFields reads header (or trailer) fields up to the empty line, validating each and applying
// the framing headers.
func (h *Head) ReadFields(br *bufio.Reader) error {
	for {
		s, e, err := h.readLine(br)
		if err != nil {
			if errors.Is(err, ErrNothingRead) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if s == e {
			h.Raw = h.Raw[:s]
			return nil
		}
		f, err := ParseField(h.Raw, s, e)
		if err != nil {
			return err
		}
		if err := h.framing(f); err != nil {
			return err
		}
		h.Fields = append(h.Fields, f)
	}
}

// framing applies Content-Length, Transfer-Encoding and Connection. Content-Length must be digits
// only and, if repeated, identical; Transfer-Encoding must be exactly "chunked" on HTTP/1.1; the two
// together are refused (RFC 9112 §6.3: a sign of smuggling; an intermediary must not forward it).
func (h *Head) framing(f Field) error {
	name, value := h.Raw[f.K0:f.K1], h.Raw[f.V0:f.V1]
	if h.Trailer {
		if string(name) == "Content-Length" || string(name) == "Transfer-Encoding" || string(name) == "Host" {
			return ErrFraming
		}
		return nil
	}
	switch string(name) {
	case "Content-Length":
		n, ok := ParseLength(value)
		if !ok || (h.Length >= 0 && n != h.Length) || h.Chunked {
			return ErrFraming
		}
		h.Length = n
	case "Transfer-Encoding":
		if h.Minor == 0 || h.Chunked || h.Length >= 0 || !bytes.EqualFold(value, []byte("chunked")) {
			return ErrFraming
		}
		h.Chunked = true
	case "Connection":
		h.Conn = append(h.Conn, len(h.Fields))
		if HasToken(value, "close") {
			h.Close = true
		}
	}
	return nil
}

// Read reads a whole response header, skipping interim (1xx) responses, which the forwarder does
// not relay. 101 is an error: the fast path never asks for an upgrade.
func (h *Head) Read(br *bufio.Reader) error {
	for {
		h.reset()
		if err := h.readStatus(br); err != nil {
			return err
		}
		if err := h.ReadFields(br); err != nil {
			return err
		}
		switch {
		case h.Status == http.StatusSwitchingProtocols:
			return fmt.Errorf("%w: unexpected 101", ErrFraming)
		case h.Status < 200:
			continue
		}
		if h.Minor == 0 && !h.keepAlive10() {
			h.Close = true
		}
		return nil
	}
}

// keepAlive10 reports whether an HTTP/1.0 response asked to keep the connection.
func (h *Head) keepAlive10() bool {
	for _, i := range h.Conn {
		f := h.Fields[i]
		if HasToken(h.Raw[f.V0:f.V1], "keep-alive") {
			return true
		}
	}
	return false
}

// Bodyless reports whether the response has no body whatever its headers say.
func (h *Head) Bodyless(method string) bool {
	return method == http.MethodHead || h.Status == http.StatusNoContent || h.Status == http.StatusNotModified ||
		h.Status < 200
}

// isConnReset reports a connection the peer reset: before the first byte of a response, that is
// how a kept-alive connection the upstream closed shows up (ErrNothingRead).
func isConnReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// CopyFields copies the end-to-end fields of h into hdr, keys prefixed with prefix (trailers), with
// one allocation for all the names and values and one for the value slices.
func (h *Head) CopyFields(hdr http.Header, prefix string) {
	h.CopyFieldsInto(hdr, prefix, nil)
}

// CopyFieldsInto is CopyFields with the value slices cut from vals, which must have
// len(h.Fields) elements (nil: allocated). hdr's values then share vals.
func (h *Head) CopyFieldsInto(hdr http.Header, prefix string, vals []string) {
	if len(h.Fields) == 0 {
		return
	}
	s := string(h.Raw)
	if vals == nil {
		vals = make([]string, len(h.Fields))
	}
	for i, fl := range h.Fields {
		if h.hop(h.Raw[fl.K0:fl.K1]) {
			vals[i] = ""
			continue
		}
		k := s[fl.K0:fl.K1]
		if prefix != "" {
			k = prefix + k
		}
		vals[i] = s[fl.V0:fl.V1]
		if prev, ok := hdr[k]; ok {
			hdr[k] = append(prev, vals[i])
		} else {
			hdr[k] = vals[i : i+1 : i+1]
		}
	}
}
