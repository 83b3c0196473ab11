package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1server"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1wire"
)

// hopRequest are the request headers that describe the client's connection, not the request, plus
// those the forwarder writes itself; none is copied upstream as received.
func hopRequest(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect", "Host", "Content-Length",
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// listed reports whether header name k is one of the comma-separated tokens of the Connection
// header values conn (those headers are hop-by-hop too).
func listed(conn []string, k string) bool {
	for _, v := range conn {
		for v != "" {
			var item string
			item, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.Trim(item, " \t"), k) {
				return true
			}
		}
	}
	return false
}

// methodWithBody are the methods whose empty body is still announced ("Content-Length: 0"), as
// net/http's client does.
func methodWithBody(m string) bool {
	return m == http.MethodPost || m == http.MethodPut || m == http.MethodPatch
}

// writeRequest writes r's header as an HTTP/1.1 request to the upstream: request line in origin
// form, the (possibly rewritten) Host, the end-to-end headers, and X-Forwarded-For (the client's
// chain with its address appended), -Host and -Proto, exactly as the stdlib reverse proxy sets them.
// The body, of length n, is framed by Content-Length whatever framing it came with. Errors surface
// on Flush.
func writeRequest(bw *bufio.Writer, r *http.Request, n int64) {
	_, _ = bw.WriteString(r.Method)
	_ = bw.WriteByte(' ')
	writeRequestURI(bw, r.URL)
	_, _ = bw.WriteString(" HTTP/1.1\r\nHost: ")
	h1wire.WriteValue(bw, r.Host)
	_, _ = bw.WriteString("\r\n")
	conn := r.Header["Connection"]
	for k, vv := range r.Header {
		if hopRequest(k) || (len(conn) > 0 && listed(conn, k)) {
			if k == "Te" && len(vv) > 0 && strings.EqualFold(vv[0], "trailers") {
				_, _ = bw.WriteString("Te: trailers\r\n")
			}
			continue
		}
		for _, v := range vv {
			_, _ = bw.WriteString(k)
			_, _ = bw.WriteString(": ")
			h1wire.WriteValue(bw, v)
			_, _ = bw.WriteString("\r\n")
		}
	}
	if ip, ok := remoteIP(r.RemoteAddr); ok {
		_, _ = bw.WriteString("X-Forwarded-For: ")
		for _, prior := range r.Header["X-Forwarded-For"] {
			h1wire.WriteValue(bw, prior)
			_, _ = bw.WriteString(", ")
		}
		_, _ = bw.WriteString(ip)
		_, _ = bw.WriteString("\r\n")
	}
	_, _ = bw.WriteString("X-Forwarded-Host: ")
	h1wire.WriteValue(bw, r.Host)
	if r.TLS != nil {
		_, _ = bw.WriteString("\r\nX-Forwarded-Proto: https\r\n")
	} else {
		_, _ = bw.WriteString("\r\nX-Forwarded-Proto: http\r\n")
	}
	if n > 0 || methodWithBody(r.Method) {
		_, _ = bw.WriteString("Content-Length: ")
		writeInt(bw, n)
		_, _ = bw.WriteString("\r\n")
	}
	_, _ = bw.WriteString("\r\n")
}

// remoteIP is net.SplitHostPort's host of a RemoteAddr, and whether it has one, without the
// general parsing for the common form, an IPv4 address and a port (one colon, no brackets): that
// parsing was ≈0.7% of a small proxied request's CPU.
func remoteIP(addr string) (string, bool) {
	i := strings.IndexByte(addr, ':')
	if i >= 0 && strings.LastIndexByte(addr, ':') == i && !strings.ContainsAny(addr, "[]") {
		return addr[:i], true
	}
	ip, _, err := net.SplitHostPort(addr)
	return ip, err == nil
}

// writeInt writes n in decimal without allocating.
func writeInt(bw *bufio.Writer, n int64) {
	_, _ = bw.Write(strconv.AppendInt(bw.AvailableBuffer(), n, 10))
}

func writeRequestURI(bw *bufio.Writer, u *url.URL) {
	if u.Opaque != "" {
		_, _ = bw.WriteString(u.RequestURI())
		return
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	_, _ = bw.WriteString(p)
	if u.ForceQuery || u.RawQuery != "" {
		_ = bw.WriteByte('?')
		_, _ = bw.WriteString(u.RawQuery)
	}
}

// relay copies the response x.head (already read from c) and its body to w, then pools c if the
// exchange ended cleanly. A failure after the header was sent aborts the client's response
// (outcomeAborted), so the client sees a truncated response, never a short one; it counts against
// the endpoint unless the client caused it (went away, or could not be written to).
func (f *h1Forwarder) relay(w http.ResponseWriter, r *http.Request, c *h1Conn, x *h1Exchange) outcome {
	hd := &x.head
	hw, own := w.(*h1server.Writer)
	// Without response filters the own server writes the upstream's fields as they came
	// (PassHead), skipping the header map; else, or when it declines, they go through the map.
	passed := own && len(f.resp) == 0 && hw.PassHead(hd)
	if !passed {
		h := w.Header()
		var vals []string
		if own {
			vals = hw.Values(len(hd.Fields)) // the connection's, reused like its header map
		}
		hd.CopyFieldsInto(h, "", vals)
		for _, fl := range f.resp {
			fl.FilterResponse(r, hd.Status, h)
		}
		w.WriteHeader(hd.Status)
	}
	out := statusOutcome(hd.Status)
	if !bodyDeadline(r.Context(), c, x, r.Method) {
		_ = c.nc.Close()
		return x.brokeOff(r.Context(), nil, out)
	}
	if hd.Bodyless(r.Method) {
		f.done(c, x)
		return out
	}
	flusher, _ := w.(http.Flusher)
	stream := flusher != nil && (hd.Length < 0 || passed && headEventStream(hd) || !passed && isEventStream(w.Header()))
	var err error
	switch {
	case hd.Chunked:
		err = f.copyChunked(w, c, x, stream, flusher)
	case hd.Length >= 0:
		err = copyN(w, c.br, hd.Length, stream, flusher)
	default:
		hd.Close = true
		err = copyN(w, c.br, -1, stream, flusher)
	}
	if err != nil {
		_ = c.nc.Close()
		return x.brokeOff(r.Context(), err, out)
	}
	f.done(c, x)
	return out
}

// brokeOff is the outcome of a response cut off after its header by err (nil: the request was
// cancelled): out, aborted, and failed unless the client was the cause.
func (x *h1Exchange) brokeOff(ctx context.Context, err error, out outcome) outcome {
	var werr clientWriteError
	if !errors.As(err, &werr) && !x.clientLeft(ctx) {
		out = outcomeFailed
	}
	return out | outcomeAborted
}

// clientWriteError is a failure to write the response to the client (which is gone, or too slow
// for the write timeout): not the endpoint's fault.
type clientWriteError struct{ err error }

func (e clientWriteError) Error() string { return "writing to the client: " + e.err.Error() }
func (e clientWriteError) Unwrap() error { return e.err }

// done pools c after a complete exchange, unless either side asked to close it or a cancellation
// may have touched it.
func (f *h1Forwarder) done(c *h1Conn, x *h1Exchange) {
	var now time.Time
	if idle := c.pool.idleFor; idle > 0 {
		now = x.now(idle) // before release, which lets the server's watch go
	}
	if !x.release() || x.head.Close {
		_ = c.nc.Close()
		return
	}
	c.pool.put(c, now)
}

func isEventStream(h http.Header) bool {
	ct := h["Content-Type"]
	return len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream")
}

// headEventStream is isEventStream for a head passed as it came (h1server.Writer.PassHead).
func headEventStream(hd *h1wire.Head) bool {
	ct, ok := hd.Value("Content-Type")
	return ok && bytes.HasPrefix(ct, []byte("text/event-stream"))
}

// copyN copies n bytes (n < 0: until EOF) from br to w straight out of br's buffer. When streaming
// it flushes whenever it is about to wait for the upstream, so events reach the client at once.
func copyN(w io.Writer, br *bufio.Reader, n int64, stream bool, fl http.Flusher) error {
	for n != 0 {
		if br.Buffered() == 0 {
			if stream {
				fl.Flush()
			}
			if _, err := br.Peek(1); err != nil {
				if n < 0 && errors.Is(err, io.EOF) {
					return nil
				}
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		k := br.Buffered()
		if n > 0 && int64(k) > n {
			k = int(n)
		}
		b, _ := br.Peek(k)
		if _, err := w.Write(b); err != nil {
			return clientWriteError{err}
		}
		_, _ = br.Discard(k)
		if n > 0 {
			n -= int64(k)
		}
	}
	if stream {
		fl.Flush()
	}
	return nil
}

var errTrailer = errors.New("bad upstream trailer")

// copyChunked copies a chunked body, then its trailer fields as response trailers.
func (f *h1Forwarder) copyChunked(w http.ResponseWriter, c *h1Conn, x *h1Exchange, stream bool, fl http.Flusher) error {
	cr := chunkedReader(c)
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	for {
		n, err := cr.Read(*buf)
		if n > 0 {
			if _, werr := w.Write((*buf)[:n]); werr != nil {
				return clientWriteError{werr}
			}
			if stream && c.br.Buffered() == 0 {
				fl.Flush()
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	hd := &x.head
	hd.Raw, hd.Fields, hd.Conn, hd.Trailer = hd.Raw[:0], hd.Fields[:0], hd.Conn[:0], true
	if err := hd.ReadFields(c.br); err != nil {
		return errors.Join(errTrailer, err)
	}
	hd.CopyFields(w.Header(), http.TrailerPrefix)
	return nil
}
