package h1server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1wire"
)

// reqError is a request the server refuses before any handler sees it, with the status it
// answers (then it closes the connection: after a framing error nothing that follows can be
// trusted).
type reqError struct {
	status int
	msg    string
}

func (e *reqError) Error() string { return e.msg }

func badRequest(msg string) error { return &reqError{status: http.StatusBadRequest, msg: msg} }

var (
	errReqHeaderTooLarge = &reqError{status: http.StatusRequestHeaderFieldsTooLarge, msg: "request header too large"}
	errReqUnsupportedTE  = &reqError{status: http.StatusNotImplemented, msg: "unsupported transfer encoding"}
	errReqVersion        = &reqError{status: http.StatusHTTPVersionNotSupported, msg: "unsupported HTTP version"}
	errReqNone           = errors.New("connection closed between requests")
	errReqNotHTTP        = errors.New("request line without an HTTP version")
	errReqTooManyFields  = &reqError{status: http.StatusRequestHeaderFieldsTooLarge, msg: "too many request header fields"}
	errReqBareLF         = badRequest("line not ended by CRLF")
)

// reqHead is the parsed request line and fields of one request; like h1Head, names and values are
// offsets into raw, which becomes one string per request.
type reqHead struct {
	raw     []byte
	fields  []h1wire.Field
	m0, m1  int // method
	t0, t1  int // request target
	minor   int
	length  int64
	chunked bool
	host    int // index in fields of the Host field, -1 when absent
	close   bool
	keep10  bool // HTTP/1.0 asked for keep-alive
	expect  bool // Expect: 100-continue
}

// readReqLine reads one line into raw (CRLF or LF stripped) under the header size limit.
func (h *reqHead) readLine(br *bufio.Reader, limit int) (int, int, error) {
	start := len(h.raw)
	for {
		frag, err := br.ReadSlice('\n')
		if len(h.raw)+len(frag) > limit {
			return 0, 0, errReqHeaderTooLarge
		}
		h.raw = append(h.raw, frag...)
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(h.raw) == 0 && (errors.Is(err, io.EOF) || isConnReset(err)) {
				return 0, 0, errReqNone
			}
			return 0, 0, err
		}
	}
	// RFC 9112 §2.2 lets a recipient take a bare LF for a line end; a proxy that does sits in
	// front of servers that may not (or that end lines at a bare CR), so it is refused.
	end := len(h.raw) - 1
	if end == start || h.raw[end-1] != '\r' {
		return 0, 0, errReqBareLF
	}
	return start, end - 1, nil
}

// read parses a request header: "METHOD SP request-target SP HTTP/1.x", then fields. It refuses
// everything that lets two parsers disagree about where a request ends (RFC 9112 §6.3, §11.2):
// Content-Length with Transfer-Encoding, differing or non-numeric lengths, a transfer coding other
// than a lone "chunked", obs-fold, white space before a colon, control characters, a missing or
// repeated Host on HTTP/1.1.
//
// limit caps the header's bytes and maxFields its fields (both answered 431).
func (h *reqHead) read(br *bufio.Reader, limit, maxFields int) error {
	*h = reqHead{raw: h.raw[:0], fields: h.fields[:0], length: -1, host: -1}
	var s, e int
	var err error
	for skipped := 0; ; skipped += 2 {
		// RFC 9112 §2.2: ignore at least one empty line before the request line; as many as fit
		// under the header size limit, so that a stream of CRLFs cannot hold a connection forever.
		if s, e, err = h.readLine(br, limit-skipped); err != nil {
			return err
		}
		if s != e {
			break
		}
		h.raw = h.raw[:0]
	}
	if err := h.requestLine(s, e); err != nil {
		return err
	}
	for {
		s, e, err := h.readLine(br, limit)
		if err != nil {
			if errors.Is(err, errReqNone) {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		if s == e {
			h.raw = h.raw[:s]
			break
		}
		if len(h.fields) >= maxFields {
			return errReqTooManyFields
		}
		f, err := h1wire.ParseField(h.raw, s, e)
		if err != nil {
			return badRequest("malformed header field")
		}
		if err := h.apply(f); err != nil {
			return err
		}
		h.fields = append(h.fields, f)
	}
	return h.check()
}

func (h *reqHead) requestLine(s, e int) error {
	line := h.raw[s:e]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return badRequest("malformed request line")
	}
	sp2 := bytes.IndexByte(line[sp1+1:], ' ')
	if sp2 <= 0 {
		return badRequest("malformed request line")
	}
	sp2 += sp1 + 1
	for _, c := range line[:sp1] {
		if !h1wire.IsTokenByte(c) {
			return badRequest("malformed method")
		}
	}
	for _, c := range line[sp1+1 : sp2] {
		if c <= ' ' || c == 0x7f {
			return badRequest("malformed request target")
		}
	}
	switch string(line[sp2+1:]) {
	case "HTTP/1.1":
		h.minor = 1
	case "HTTP/1.0":
		h.minor = 0
	default:
		if bytes.HasPrefix(line[sp2+1:], []byte("HTTP/")) {
			return errReqVersion
		}
		if !bytes.Contains(bytes.ToUpper(line[sp2+1:]), []byte("HTTP/")) {
			// Not HTTP at all (a scanner, a bad HTTP/2 preface): closed without an HTTP/1.1
			// answer the client would not understand.
			return errReqNotHTTP
		}
		return badRequest("malformed request line")
	}
	h.m0, h.m1, h.t0, h.t1 = s, s+sp1, s+sp1+1, s+sp2
	return nil
}

func (h *reqHead) apply(f h1wire.Field) error {
	name, value := h.raw[f.K0:f.K1], h.raw[f.V0:f.V1]
	switch string(name) {
	case "Host":
		if h.host >= 0 {
			return badRequest("repeated Host")
		}
		h.host = len(h.fields)
	case "Content-Length":
		n, ok := h1wire.ParseLength(value)
		if !ok {
			return badRequest("bad Content-Length")
		}
		if h.length >= 0 {
			// RFC 9110 §8.6 lets equal repeats through; a proxy forwarding to servers that may
			// not agree refuses them, as it refuses a list ("3, 3").
			return badRequest("repeated Content-Length")
		}
		h.length = n
	case "Transfer-Encoding":
		if h.chunked {
			return badRequest("repeated Transfer-Encoding")
		}
		if len(value) == 0 {
			return badRequest("empty Transfer-Encoding")
		}
		if !bytes.EqualFold(value, []byte("chunked")) {
			return errReqUnsupportedTE
		}
		h.chunked = true
	case "Connection":
		if h1wire.HasToken(value, "close") {
			h.close = true
		}
		if h1wire.HasToken(value, "keep-alive") {
			h.keep10 = true
		}
	case "Expect":
		if bytes.EqualFold(value, []byte("100-continue")) {
			h.expect = true
		}
	}
	return nil
}

func (h *reqHead) check() error {
	switch {
	case h.chunked && h.length >= 0:
		return badRequest("both Content-Length and Transfer-Encoding")
	case h.chunked && h.minor == 0:
		return badRequest("Transfer-Encoding on HTTP/1.0")
	case h.host < 0 && h.minor == 1:
		return badRequest("missing Host")
	}
	if h.host >= 0 {
		f := h.fields[h.host]
		if !httpguts.ValidHostHeader(string(h.raw[f.V0:f.V1])) {
			return badRequest("malformed Host")
		}
	}
	if h.minor == 0 && !h.keep10 {
		h.close = true
	}
	return nil
}

// method returns common methods as constants, so they cost no allocation.
func method(s string) string {
	switch s {
	case http.MethodGet:
		return http.MethodGet
	case http.MethodHead:
		return http.MethodHead
	case http.MethodPost:
		return http.MethodPost
	case http.MethodPut:
		return http.MethodPut
	case http.MethodDelete:
		return http.MethodDelete
	case http.MethodOptions:
		return http.MethodOptions
	case http.MethodPatch:
		return http.MethodPatch
	}
	return s
}

// parseTarget fills u from an origin-form target ("/path?query") without allocating when the path
// has no escapes and nothing net/url would re-escape; anything else (percent escapes, absolute
// form, "*") goes through url.ParseRequestURI, which is what net/http does for every request.
func parseTarget(u *url.URL, target string) error {
	*u = url.URL{}
	if len(target) > 0 && target[0] == '/' {
		path, query, hasQuery := cutByte(target, '?')
		if plainPath(path) {
			u.Path, u.RawQuery, u.ForceQuery = path, query, hasQuery && query == ""
			return nil
		}
	}
	pu, err := url.ParseRequestURI(target)
	if err != nil {
		return badRequest("malformed request target")
	}
	*u = *pu
	return nil
}

func cutByte(s string, c byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// plainPath reports whether p has only characters net/url keeps unescaped in a path (so it would
// give Path == p and an empty RawPath).
func plainPath(p string) bool {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c >= 0x80 || !pathTable[c] {
			return false
		}
	}
	return true
}

var pathTable = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	// What net/url's shouldEscape(c, encodePath) leaves alone: it escapes "!'()*" in a path, so
	// a raw path with them gets a RawPath and goes the slow way.
	for _, c := range "-._~$&+,;=:@/" {
		t[c] = true
	}
	return t
}()

var chunkedTE = []string{"chunked"}

// fillRequest turns the parsed head into c's reused request: one string for the whole header block,
// and the connection's reused header map, value slices and URL.
func (c *conn) fillRequest(r *http.Request, h *reqHead) error {
	s := string(h.raw)
	target := s[h.t0:h.t1]
	if err := parseTarget(&c.u, target); err != nil {
		return err
	}
	clear(c.hdr)
	if cap(c.vals) < len(h.fields) {
		c.vals = make([]string, len(h.fields))
	}
	vals := c.vals[:len(h.fields)]
	host := ""
	for i, f := range h.fields {
		k, v := s[f.K0:f.K1], s[f.V0:f.V1]
		if i == h.host {
			host, vals[i] = v, ""
			continue
		}
		vals[i] = v
		if prev, ok := c.hdr[k]; ok {
			c.hdr[k] = append(prev, v)
		} else {
			c.hdr[k] = vals[i : i+1 : i+1]
		}
	}
	if c.u.Host != "" {
		host = c.u.Host // absolute form: the target's authority wins (RFC 9112 §3.2.2)
	}
	// Every exported field is set: the request is reused, its context (the connection's) stays.
	r.Method = method(s[h.m0:h.m1])
	r.URL = &c.u
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	if h.minor == 0 {
		r.Proto, r.ProtoMinor = "HTTP/1.0", 0
	}
	r.Header = c.hdr
	r.Body, r.GetBody = nil, nil
	r.ContentLength, r.TransferEncoding = h.length, nil
	switch {
	case h.chunked:
		r.ContentLength, r.TransferEncoding = -1, chunkedTE
	case h.length < 0:
		r.ContentLength = 0
	}
	r.Close = h.close
	r.Host = host
	r.Form, r.PostForm, r.MultipartForm, r.Trailer = nil, nil, nil, nil
	r.RemoteAddr = c.remote
	r.RequestURI = target
	r.TLS, r.Response, r.Pattern = c.tls, nil, ""
	return nil
}
