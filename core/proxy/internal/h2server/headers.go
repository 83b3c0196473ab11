package h2server

import (
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlock assembles one HEADERS frame and its CONTINUATION frames. Every block is decoded
// whole, even one that will be refused, because HPACK's dynamic table is shared by the
// connection. What it costs is bounded: fragment bytes and frame count per block (CONTINUATION
// flood, CVE-2024-27316), and the decoded list size (HPACK bomb), past which fields are decoded
// but no longer kept.
type headerBlock struct {
	conn      *conn
	active    bool
	streamID  uint32
	endStream bool
	frames    int
	bytes     int
	size      uint32
	tooBig    bool
	invalid   string // the first malformation, "" for none
	regular   bool   // a regular field was seen (pseudo-fields must come first)
	pseudo    [4]string
	seen      uint8 // bit i: pseudo[i] was set
	hdr       http.Header
	vals      []string // backing store of hdr's first values (see onField)
	cookies   []string
}

// The request pseudo-header fields, by index into headerBlock.pseudo.
const (
	pMethod = iota
	pScheme
	pAuthority
	pPath
)

func (c *conn) maxBlockBytes() int { return 2*int(c.srv.cfg.MaxHeaderListSize) + maxReadFrameSize }

// maxBlockFrames bounds CONTINUATION frames per block: a full-size header list needs a few
// frames; hundreds of (often empty) ones are an attack.
func (c *conn) maxBlockFrames() int { return 16 + 2*int(c.srv.cfg.MaxHeaderListSize)/1024 }

func (c *conn) onHeaders(f *http2.HeadersFrame) error {
	if f.StreamID%2 == 0 {
		return connError{http2.ErrCodeProtocol, "even stream id from a client"}
	}
	c.recvWork++
	b := &c.block
	*b = headerBlock{conn: c, active: true, streamID: f.StreamID, endStream: f.StreamEnded(), hdr: make(http.Header)}
	if f.HasPriority() && f.Priority.StreamDep == f.StreamID {
		b.invalid = "stream depends on itself" // still decoded: the block changes HPACK state
	}
	c.dec.SetEmitEnabled(true)
	return c.addFragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

func (c *conn) onContinuation(f *http2.ContinuationFrame) error {
	return c.addFragment(f.HeaderBlockFragment(), f.HeadersEnded())
}

func (c *conn) addFragment(frag []byte, end bool) error {
	b := &c.block
	b.frames++
	b.bytes += len(frag)
	if b.bytes > c.maxBlockBytes() || b.frames > c.maxBlockFrames() {
		return connError{http2.ErrCodeEnhanceYourCalm, "header block too large or too fragmented"}
	}
	if _, err := c.dec.Write(frag); err != nil {
		return connError{http2.ErrCodeCompression, err.Error()}
	}
	if !end {
		return nil
	}
	b.active = false
	if err := c.dec.Close(); err != nil {
		return connError{http2.ErrCodeCompression, err.Error()}
	}
	return c.endBlock()
}

// onField checks and keeps one decoded field.
func (b *headerBlock) onField(hf hpack.HeaderField) {
	c := b.conn
	b.size += hf.Size()
	if b.size > c.srv.cfg.MaxHeaderListSize {
		b.tooBig = true
		c.dec.SetEmitEnabled(false)
		return
	}
	if b.invalid != "" {
		return
	}
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		b.invalid = "invalid value of " + strconv.Quote(hf.Name)
		return
	}
	if strings.HasPrefix(hf.Name, ":") {
		b.onPseudo(hf)
		return
	}
	b.regular = true
	if !validName(hf.Name) {
		b.invalid = "invalid field name " + strconv.Quote(hf.Name)
		return
	}
	switch hf.Name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		b.invalid = "connection-specific field " + hf.Name
		return
	case "te":
		if hf.Value != "trailers" {
			b.invalid = `te other than "trailers"`
			return
		}
	case "cookie":
		b.cookies = append(b.cookies, hf.Value) // joined with "; " at the end (RFC 9113 §8.2.3)
		return
	}
	k := textproto.CanonicalMIMEHeaderKey(hf.Name)
	if vv, ok := b.hdr[k]; ok {
		b.hdr[k] = append(vv, hf.Value)
		return
	}
	// A name's first value goes into a slice shared by the block's fields (capacity capped, so
	// that a second value of the same name is appended elsewhere): one allocation for the
	// usual handful of fields, as net/textproto's header reader does.
	if len(b.vals) == cap(b.vals) {
		b.vals = make([]string, 0, 8)
	}
	b.vals = append(b.vals, hf.Value)
	n := len(b.vals)
	b.hdr[k] = b.vals[n-1 : n : n]
}

func (b *headerBlock) onPseudo(hf hpack.HeaderField) {
	if b.regular {
		b.invalid = "pseudo-header field after a regular one"
		return
	}
	i := -1
	switch hf.Name {
	case ":method":
		i = pMethod
	case ":scheme":
		i = pScheme
	case ":authority":
		i = pAuthority
	case ":path":
		i = pPath
	}
	if i < 0 {
		b.invalid = "unknown pseudo-header field " + hf.Name
		return
	}
	if b.seen&(1<<i) != 0 {
		b.invalid = "duplicate " + hf.Name
		return
	}
	b.seen |= 1 << i
	b.pseudo[i] = hf.Value
}

// validName is a field name as HTTP/2 allows it: a token without upper-case letters.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || !httpguts.IsTokenRune(rune(c)) {
			return false
		}
	}
	return true
}

// endBlock acts on a complete header block: a new request, or a request's trailers.
func (c *conn) endBlock() error {
	b := &c.block
	id := b.streamID
	c.mu.Lock()
	st := c.streams[id]
	if st != nil {
		c.mu.Unlock()
		return c.onTrailers(st)
	}
	if id <= c.maxStreamID {
		how := c.gone.how(id)
		c.mu.Unlock()
		if how == closedUnknown {
			return connError{http2.ErrCodeProtocol, "stream id lower than one opened before"}
		}
		return frameOnClosed(how, id, "HEADERS") // the block was decoded all the same: HPACK state is shared
	}
	if c.goingAway || c.closed {
		c.mu.Unlock()
		return nil // after GOAWAY new streams are ignored (RFC 9113 §6.8)
	}
	c.maxStreamID = id
	if b.tooBig {
		if b.endStream {
			c.gone.noteEnded(id) // 431 with END_STREAM: closed both ways
		} else {
			c.gone.noteReset(id, false) // 431, then RST_STREAM(NO_ERROR)
		}
		c.mu.Unlock()
		return c.refuseTooLarge(id, b.endStream)
	}
	if b.invalid != "" || !b.validRequest() {
		c.mu.Unlock()
		return streamError{id, http2.ErrCodeProtocol}
	}
	if uint32(len(c.streams)) >= c.srv.cfg.MaxConcurrentStreams {
		c.refused++
		calm := c.refused > resetAllowance+c.completed
		c.mu.Unlock()
		if calm {
			return connError{http2.ErrCodeEnhanceYourCalm, "too many refused streams"}
		}
		return streamError{id, http2.ErrCodeRefusedStream}
	}
	st = c.newStreamLocked(id, b.endStream)
	c.mu.Unlock()
	r, err := c.newRequest(st, b)
	if err != nil {
		c.mu.Lock()
		delete(c.streams, id)
		c.mu.Unlock()
		return streamError{id, http2.ErrCodeProtocol}
	}
	c.busy.Add(1)
	c.srv.workers.run(job{c: c, st: st, r: r})
	return nil
}

// validRequest checks the pseudo-header fields of a request (RFC 9113 §8.3.1); CONNECT carries
// only :method and :authority.
func (b *headerBlock) validRequest() bool {
	if b.seen&(1<<pMethod) == 0 {
		return false
	}
	if b.pseudo[pMethod] == http.MethodConnect {
		return b.seen == 1<<pMethod|1<<pAuthority
	}
	return b.seen&(1<<pScheme) != 0 && b.seen&(1<<pPath) != 0 && b.pseudo[pPath] != ""
}

func (c *conn) onTrailers(st *stream) error {
	b := &c.block
	c.mu.Lock()
	closed := st.remoteClosed
	how := c.closedHowLocked(st, st.id)
	c.mu.Unlock()
	switch {
	case closed: // reset, half-closed (remote), or closed though its handler has not quite finished
		return frameOnClosed(how, st.id, "HEADERS")
	case !b.endStream || b.seen != 0 || b.invalid != "" || st.declLen >= 0 && st.gotLen != st.declLen:
		return streamError{st.id, http2.ErrCodeProtocol}
	}
	if err := c.endRemote(st); err != nil {
		return err
	}
	st.body.finish(b.hdr)
	return nil
}

// newRequest builds the handler's request from a complete header block.
func (c *conn) newRequest(st *stream, b *headerBlock) (*http.Request, error) {
	method, path := b.pseudo[pMethod], b.pseudo[pPath]
	var u *url.URL
	var err error
	switch {
	case method == http.MethodConnect:
		u = &url.URL{Host: b.pseudo[pAuthority]}
		path = b.pseudo[pAuthority]
	case method == http.MethodOptions && path == "*":
		u = &url.URL{Path: "*"}
	default:
		u, err = url.ParseRequestURI(path)
		if err != nil {
			return nil, err
		}
	}
	if len(b.cookies) > 0 {
		b.hdr["Cookie"] = []string{strings.Join(b.cookies, "; ")}
	}
	host := b.pseudo[pAuthority]
	if host == "" {
		host = b.hdr.Get("Host")
	}
	delete(b.hdr, "Host") // r.Host says it, as the HTTP/1.1 server leaves it out of the map too
	cl := int64(-1)
	if v := b.hdr["Content-Length"]; len(v) > 0 {
		n, err := strconv.ParseUint(v[0], 10, 63)
		if err != nil || len(v) > 1 && !allSame(v) {
			return nil, errBadLength
		}
		cl = int64(n)
	}
	if b.endStream {
		if cl > 0 {
			return nil, errBadLength
		}
		cl = 0
	}
	st.declLen = cl
	// base stays on the stack (escape analysis is flow-insensitive: it must not be the variable
	// that later holds the heap copy WithContext makes): one Request allocated per stream.
	base := http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     b.hdr,
		Host:       host,
		RemoteAddr: c.remote,
		RequestURI: path,
		TLS:        c.tls,
	}
	if b.endStream {
		base.Body, base.ContentLength = http.NoBody, 0
	} else {
		base.Body, base.ContentLength = &st.body, cl
		if tr := b.hdr["Trailer"]; len(tr) > 0 {
			base.Trailer = declaredTrailers(tr)
		}
	}
	st.w.reqHead = method == http.MethodHead
	r := base.WithContext(st.ctx)
	if !b.endStream {
		st.body.req = r
	}
	return r, nil
}

func allSame(v []string) bool {
	for _, s := range v[1:] {
		if s != v[0] {
			return false
		}
	}
	return true
}

func declaredTrailers(tr []string) http.Header {
	h := http.Header{}
	for _, line := range tr {
		for _, k := range strings.Split(line, ",") {
			if k = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(k)); k != "" {
				h[k] = nil
			}
		}
	}
	return h
}

// refuseTooLarge answers a request whose header list is over the limit with 431 and no handler
// (what net/http's server does too); a request with a body is then reset, so the client stops
// sending it.
func (c *conn) refuseTooLarge(id uint32, endStream bool) error {
	c.lockW()
	err := c.writeHeaderBlock(id, func(c *conn) { c.encodeStatus(http.StatusRequestHeaderFieldsTooLarge) }, true)
	if err == nil && !endStream {
		err = c.fr.WriteRSTStream(id, http2.ErrCodeNo)
	}
	return c.unlockW(err)
}
