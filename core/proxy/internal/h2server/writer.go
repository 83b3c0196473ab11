package h2server

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// responseWriter is a stream's http.ResponseWriter. It keeps up to responseBufferSize of body
// before sending, so that a small response leaves as one HEADERS and one DATA frame in a single
// write when the handler returns. Trailers are the fields named in a "Trailer" header or set
// with http.TrailerPrefix after the body, as net/http's writers take them.
type responseWriter struct {
	st          *stream
	hdr         http.Header
	status      int
	wroteHeader bool
	sentHeader  bool
	reqHead     bool // a HEAD request: the body is not sent
	buf         []byte
	// small is buf's first store: a small response body (an API answer, a gRPC message) costs
	// no allocation of its own, as it lives in the stream.
	small    [256]byte
	declared []string // trailer names the "Trailer" header announced
	ended    bool     // the response is complete and streamEnded has run (send)
	failed   atomic.Pointer[error]
}

var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
)

func (w *responseWriter) Header() http.Header {
	if w.hdr == nil {
		w.hdr = make(http.Header)
	}
	return w.hdr
}

func (w *responseWriter) fail(err error) { w.failed.CompareAndSwap(nil, &err) }

func (w *responseWriter) err() error {
	if p := w.failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (w *responseWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 {
		if code != http.StatusSwitchingProtocols {
			_ = w.st.c.writeInformational(w.st, code, w.hdr)
		}
		return
	}
	w.status, w.wroteHeader = code, true
	if tr := w.hdr["Trailer"]; len(tr) > 0 {
		for _, line := range tr {
			for _, k := range strings.Split(line, ",") {
				if k = strings.TrimSpace(k); k != "" {
					w.declared = append(w.declared, http.CanonicalHeaderKey(k))
				}
			}
		}
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.err(); err != nil {
		return 0, err
	}
	if w.reqHead || len(p) == 0 {
		return len(p), nil
	}
	if len(w.buf)+len(p) <= responseBufferSize {
		if w.buf == nil {
			if len(p) <= len(w.small) {
				w.buf = w.small[:0]
			} else {
				w.buf = make([]byte, 0, min(responseBufferSize, max(len(p), 2*len(w.small))))
			}
		}
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	if len(w.buf) > 0 {
		if err := w.send(w.buf, false, nil); err != nil {
			return 0, err
		}
		w.buf = w.buf[:0]
	}
	if err := w.send(p, false, nil); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError sends the header and what the body has so far (http.ResponseController calls it).
func (w *responseWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.err(); err != nil {
		return err
	}
	if w.sentHeader && len(w.buf) == 0 {
		return nil
	}
	err := w.send(w.buf, false, nil)
	w.buf = w.buf[:0]
	return err
}

// finish completes the response once the handler has returned: the rest of the body and the
// trailers, with END_STREAM. A client still sending its request is not reset here: the stream
// drains (see conn.streamEnded), so that what it sends next is judged the same whether or not
// the response was quicker.
func (w *responseWriter) finish() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if err := w.err(); err != nil {
		return err
	}
	trailers := w.trailers()
	if !w.sentHeader && !w.reqHead && w.status != http.StatusNoContent && w.status != http.StatusNotModified &&
		w.hdr["Content-Length"] == nil && trailers == nil {
		w.Header()["Content-Length"] = []string{strconv.Itoa(len(w.buf))}
	}
	return w.send(w.buf, true, trailers)
}

// trailers are the response's trailer fields, nil for none.
func (w *responseWriter) trailers() http.Header {
	var tr http.Header
	for _, k := range w.declared {
		if vv := w.hdr[k]; len(vv) > 0 {
			if tr == nil {
				tr = http.Header{}
			}
			tr[k] = vv
		}
	}
	for k, vv := range w.hdr {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok && len(vv) > 0 {
			if tr == nil {
				tr = http.Header{}
			}
			tr[http.CanonicalHeaderKey(name)] = vv
		}
	}
	return tr
}

// send writes the header if it has not gone out, then data, then the trailers; end sets
// END_STREAM on the last frame. Data waits for flow-control credit (at most StallTimeout).
func (w *responseWriter) send(data []byte, end bool, trailers http.Header) error {
	c, st := w.st.c, w.st
	for {
		n := 0
		if len(data) > 0 {
			var err error
			// The header does not wait for credit: with none at hand it goes out alone first.
			if n, err = c.takeWindow(st, len(data), w.sentHeader); err == nil && n == 0 {
				if err = w.sendHeaderOnly(); err == nil {
					n, err = c.takeWindow(st, len(data), true)
				}
			}
			if err != nil {
				c.resetStream(st, http2.ErrCodeCancel)
				return err
			}
		}
		last := n == len(data)
		c.lockW()
		err := c.werr
		if err == nil {
			err = w.writeFrames(data[:n], last, end, trailers)
		}
		if err == nil && last && end {
			st.responded.Store(true) // before unlockW flushes END_STREAM to the client
			// The stream leaves the table (or drains) before the client can see its
			// END_STREAM: a client at MAX_CONCURRENT_STREAMS may open the next stream the
			// moment it does (RFC 9113 §5.1.2 counts only open and half-closed streams), and
			// must not find this one still counted while its handler returns.
			c.streamEnded(st, false)
			w.ended = true
		}
		err = c.unlockW(err)
		if err != nil {
			w.fail(err)
			return err
		}
		data = data[n:]
		if last {
			return nil
		}
	}
}

// sendHeaderOnly sends the response header without END_STREAM.
func (w *responseWriter) sendHeaderOnly() error {
	c := w.st.c
	c.lockW()
	err := c.werr
	if err == nil {
		w.sentHeader = true
		err = c.writeHeaderBlock(w.st.id, w.encodeHeader, false)
	}
	return c.unlockW(err)
}

// writeFrames writes the frames of one send step under wmu: the header (once), data in frames
// of the client's maximum size, and when this is the last step of an ending response, END_STREAM
// on the data or the trailers.
func (w *responseWriter) writeFrames(data []byte, last, end bool, trailers http.Header) error {
	c, id := w.st.c, w.st.id
	endNow := last && end && trailers == nil
	if !w.sentHeader {
		w.sentHeader = true
		if err := c.writeHeaderBlock(id, w.encodeHeader, endNow && len(data) == 0); err != nil {
			return err
		}
		if endNow && len(data) == 0 {
			return nil
		}
	}
	if endNow && len(data) == 0 {
		return c.fr.WriteData(id, true, nil) // the header went out with an earlier flush
	}
	frame := c.frameSize()
	for len(data) > 0 {
		c.sentWork++
		k := min(len(data), frame)
		if err := c.fr.WriteData(id, endNow && k == len(data), data[:k]); err != nil {
			return err
		}
		data = data[k:]
	}
	if last && end && trailers != nil {
		return c.writeHeaderBlock(id, func(c *conn) { c.encodeFields(trailers) }, true)
	}
	return nil
}

func (c *conn) frameSize() int { return int(c.peerFrame.Load()) }

// takeWindow waits for send credit for up to want bytes of st and takes what there is (at most
// four frames' worth, so that one stream does not hold the writer long).
// Without wait it returns 0 when there is no credit now.
func (c *conn) takeWindow(st *stream, want int, wait bool) (int, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	c.mu.Lock()
	for {
		if st.reset || c.closed {
			c.mu.Unlock()
			if err := st.w.err(); err != nil {
				return 0, err
			}
			return 0, errStreamReset
		}
		n := min(int64(want), c.sendWin, st.sendWin, int64(4*c.frameSize()))
		if n > 0 {
			c.sendWin -= n
			st.sendWin -= n
			c.mu.Unlock()
			return int(n), nil
		}
		if !wait {
			c.mu.Unlock()
			return 0, nil
		}
		if c.winCh == nil {
			c.winCh = make(chan struct{})
		}
		ch := c.winCh
		c.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(c.srv.cfg.StallTimeout)
		}
		select {
		case <-ch:
		case <-timer.C:
			return 0, errStall
		}
		c.mu.Lock()
	}
}

func (w *responseWriter) encodeHeader(c *conn) {
	c.encodeStatus(w.status)
	c.encodeFields(w.hdr)
}

// encodeStatus encodes :status. The common codes are entries of HPACK's static table (RFC 7541
// Appendix A, indices 8-14): one byte, written without the encoder's table search.
// A dynamic table size update owed since the client's SETTINGS_HEADER_TABLE_SIZE must open the
// next block (RFC 7541 §4.2): the encoder writes it, so that block goes through the encoder.
func (c *conn) encodeStatus(code int) {
	if i, ok := staticStatus(code); ok && !c.tableResized {
		c.hbuf.WriteByte(0x80 | i) // indexed header field representation
		return
	}
	c.tableResized = false
	_ = c.henc.WriteField(hpack.HeaderField{Name: ":status", Value: statusText(code)})
}

func staticStatus(code int) (byte, bool) {
	switch code {
	case 200:
		return 8, true
	case 204:
		return 9, true
	case 206:
		return 10, true
	case 304:
		return 11, true
	case 400:
		return 12, true
	case 404:
		return 13, true
	case 500:
		return 14, true
	}
	return 0, false
}

// encodeFields encodes a header map minus the fields HTTP/2 forbids (connection-specific ones)
// and those that are only instructions to this writer (Trailer, TrailerPrefix keys). Called
// with wmu held.
func (c *conn) encodeFields(h http.Header) {
	for k, vv := range h {
		switch k {
		case "Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Trailer":
			continue
		}
		if strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		name := c.lowerName(k)
		for _, v := range vv {
			_ = c.henc.WriteField(hpack.HeaderField{Name: name, Value: v, Sensitive: name == "set-cookie"})
		}
	}
}

// writeHeaderBlock encodes a header block and writes it as HEADERS and CONTINUATION frames.
// Called with wmu held (the encoder's table is the connection's, in wire order).
func (c *conn) writeHeaderBlock(id uint32, encode func(*conn), end bool) error {
	c.sentWork++
	c.hbuf.Reset()
	encode(c)
	block := c.hbuf.Bytes()
	frame := c.frameSize()
	first := block[:min(len(block), frame)]
	block = block[len(first):]
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first,
		EndStream: end, EndHeaders: len(block) == 0}); err != nil {
		return err
	}
	for len(block) > 0 {
		k := min(len(block), frame)
		if err := c.fr.WriteContinuation(id, k == len(block), block[:k]); err != nil {
			return err
		}
		block = block[k:]
	}
	return nil
}

// writeInformational sends a 1xx response header (103 Early Hints, 100 Continue).
func (c *conn) writeInformational(st *stream, code int, h http.Header) error {
	c.lockW()
	err := c.writeHeaderBlock(st.id, func(c *conn) {
		c.encodeStatus(code)
		c.encodeFields(h)
	}, false)
	return c.unlockW(err)
}

var statusTexts = func() (t [600]string) {
	for i := 100; i < len(t); i++ {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func statusText(code int) string {
	if code >= 0 && code < len(statusTexts) {
		return statusTexts[code]
	}
	return strconv.Itoa(code)
}

// commonLower maps the canonical form of common header names to their HTTP/2 (lower-case) form
// without allocating.
var commonLower = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Accept-Ranges", "Age",
		"Access-Control-Allow-Origin", "Allow", "Cache-Control", "Content-Disposition", "Content-Encoding",
		"Content-Language", "Content-Length", "Content-Location", "Content-Range", "Content-Type", "Cookie",
		"Date", "Etag", "Expires", "Grpc-Encoding", "Grpc-Accept-Encoding", "Grpc-Message", "Grpc-Status",
		"Last-Modified", "Link", "Location", "Server", "Set-Cookie", "Strict-Transport-Security", "Vary",
		"Via", "Www-Authenticate", "X-Content-Type-Options", "X-Frame-Options", "X-Request-Id"} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

// lowerName is k in lower case. Names not in commonLower are remembered per connection (up to
// maxLowerCache of them), so that an upstream's own headers (X-Backend-Port, X-Request-Start)
// are lowered once per connection rather than once per response. Called with wmu held.
func (c *conn) lowerName(k string) string {
	if v, ok := commonLower[k]; ok {
		return v
	}
	if v, ok := c.lowerCache[k]; ok {
		return v
	}
	v := strings.ToLower(k)
	if len(c.lowerCache) < maxLowerCache {
		if c.lowerCache == nil {
			c.lowerCache = make(map[string]string)
		}
		c.lowerCache[k] = v
	}
	return v
}

const maxLowerCache = 64
