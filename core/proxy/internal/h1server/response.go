package h1server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1wire"
)

// Writer is the http.ResponseWriter of the HTTP/1.1 server. Like net/http's, it holds the start
// of the body back: a handler that finishes having written at most pendingMax bytes gets a
// Content-Length, a longer or flushed body goes out chunked. It also implements http.Flusher and
// http.Hijacker (for Upgrade tunnels through the stdlib reverse proxy).
type Writer struct {
	c       *conn
	hdr     http.Header
	status  int
	head    bool // HEAD request: no body on the wire
	minor   int
	close   bool // close the connection after this response
	wrote   bool // handler called WriteHeader or Write
	sent    bool // status line and header are on the wire (in bw)
	chunked bool
	length  int64 // declared Content-Length, -1 if none
	written int64
	pending []byte
	trailer []string // names declared in the Trailer header
	hijack  bool
	err     error
	// ended is the handler's reading of the clock at its end (Ended), zero if it took none.
	ended time.Time
	// up is the upstream head PassHead took, written by commit behind the header map's fields;
	// upDate: it has a Date field.
	up     *h1wire.Head
	upDate bool
	// scratch is the engine's per-connection value (Config.NewScratch), kept across requests.
	scratch any
	vals    []string // Values' slice, reused by the connection's next response
}

const pendingMax = 4 << 10

var (
	_ http.ResponseWriter = (*Writer)(nil)
	_ http.Flusher        = (*Writer)(nil)
	_ http.Hijacker       = (*Writer)(nil)
)

func (w *Writer) reset(c *conn, minor int, head, closeAfter bool) {
	clear(w.hdr)
	*w = Writer{c: c, hdr: w.hdr, status: http.StatusOK, head: head, minor: minor, close: closeAfter,
		length: -1, pending: w.pending[:0], trailer: w.trailer[:0], scratch: w.scratch, vals: w.vals}
	if w.hdr == nil {
		w.hdr = make(http.Header, 8)
	}
}

// Status is the response's status: 200 until the handler writes another.
func (w *Writer) Status() int { return w.status }

// Written is how many body bytes the handler has written.
func (w *Writer) Written() int64 { return w.written }

// Arrived is when the request arrived: the server reads the clock once per request, for the
// response's Date and its timeouts, and the engine's metrics and access log use the same reading.
func (w *Writer) Arrived() time.Time { return w.c.now }

// Ended reads the clock at the end of the handler, for an engine that times the request, and
// the server takes that reading as when the response was done instead of reading the clock
// again after the handler: an observed request then costs no clock read more than another.
func (w *Writer) Ended() time.Time {
	w.ended = time.Now()
	return w.ended
}

// Scratch is the engine's value for this connection (Config.NewScratch), nil when it has none.
// It outlives the request: the engine resets what it keeps there.
func (w *Writer) Scratch() any { return w.scratch }

// observer is what the engine's scratch value implements for filters to report on the request
// (core.RequestObserver, which this package does not import).
type observer interface {
	ObserveClient(a netip.AddrPort)
	ObservedOrigin() (listener, gateway string)
}

// ObserveClient passes the client a filter resolved on to the scratch value, when it observes.
func (w *Writer) ObserveClient(a netip.AddrPort) {
	if o, ok := w.scratch.(observer); ok {
		o.ObserveClient(a)
	}
}

// ObservedOrigin is the scratch value's listener and Gateway of the request, when it observes.
func (w *Writer) ObservedOrigin() (listener, gateway string) {
	if o, ok := w.scratch.(observer); ok {
		return o.ObservedOrigin()
	}
	return "", ""
}

// Values returns n strings for the values of the response header (slices of it put into
// Header), valid until the response is finished: the connection reuses them for its next
// response, as it reuses the header map. A handler copying an upstream's header saves an
// allocation per response with it.
func (w *Writer) Values(n int) []string {
	if cap(w.vals) < n {
		w.vals = make([]string, n)
	}
	return w.vals[:n]
}

// Header implements http.ResponseWriter.
func (w *Writer) Header() http.Header { return w.hdr }

func (w *Writer) WriteHeader(code int) {
	if w.wrote || w.hijack {
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		w.interim(code)
		return
	}
	w.wrote, w.status = true, code
}

// interim writes a 1xx response at once with the header as it is now (103 Early Hints).
func (w *Writer) interim(code int) {
	if code == http.StatusContinue || w.minor == 0 {
		return
	}
	w.c.body.noContinue()
	bw := w.c.bw
	writeStatusLine(bw, code)
	writeHeaderFields(bw, w.hdr)
	_, _ = bw.WriteString("\r\n")
	w.err = bw.Flush()
}

func (w *Writer) bodyAllowed() bool {
	return !w.head && w.status != http.StatusNoContent && w.status != http.StatusNotModified
}

func (w *Writer) Write(p []byte) (int, error) {
	if w.hijack {
		return 0, http.ErrHijacked
	}
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !w.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	if w.err != nil {
		return 0, w.err
	}
	if !w.sent && len(w.pending) == 0 && w.declaredLength() {
		// A declared length settles the framing: the header is committed (to the buffer, not yet
		// the wire) and the body goes straight behind it rather than through pending.
		w.commit(false)
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.sent {
		if len(w.pending)+len(p) <= pendingMax {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		w.commit(false)
	}
	w.body(p)
	return len(p), w.err
}

// commit writes the status line and header, choosing the framing: the handler's Content-Length,
// else (final) the length of what was written, else chunked; HTTP/1.0 without a length closes.
func (w *Writer) commit(final bool) {
	if w.sent {
		return
	}
	w.sent = true
	if !w.wrote {
		w.wrote = true
	}
	h := w.hdr
	if !w.declaredLength() || int64(len(w.pending)) > w.length {
		// Invalid, or shorter than what the handler wrote before it set it: the framing is
		// chosen as if there were none, so that no byte beyond the length reaches the wire.
		delete(h, "Content-Length")
		w.length = -1
	}
	delete(h, "Transfer-Encoding")
	bodyOK := w.bodyAllowed()
	if !bodyOK && !w.head {
		delete(h, "Content-Length")
	}
	switch {
	case w.status == http.StatusSwitchingProtocols:
	case w.length >= 0 || !bodyOK:
	case final && !hasTrailers(h):
		w.length = int64(len(w.pending))
		h["Content-Length"] = []string{strconv.Itoa(len(w.pending))}
	case w.minor == 1:
		w.chunked = true
	default:
		w.close = true
	}
	if t := h["Trailer"]; len(t) > 0 && w.chunked {
		for _, v := range t {
			for _, name := range strings.Split(v, ",") {
				if name = strings.TrimSpace(name); name != "" {
					w.trailer = append(w.trailer, http.CanonicalHeaderKey(name))
				}
			}
		}
	}
	if w.c.body.noContinue() || w.c.srv.closing.Load() {
		w.close = true
	}
	bw := w.c.bw
	writeStatusLine(bw, w.status)
	writeHeaderFields(bw, h)
	if w.up != nil {
		w.up.WriteFields(bw)
		w.up = nil // the caller's: not to be read after commit
	}
	if _, ok := h["Date"]; !ok && !w.upDate {
		_, _ = bw.WriteString("Date: ")
		_, _ = bw.WriteString(httpDate(w.c.now))
		_, _ = bw.WriteString("\r\n")
	}
	if w.chunked {
		_, _ = bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	if w.close {
		_, _ = bw.WriteString("Connection: close\r\n")
	} else if w.minor == 0 {
		_, _ = bw.WriteString("Connection: keep-alive\r\n")
	}
	_, _ = bw.WriteString("\r\n")
	if len(w.pending) > 0 {
		p := w.pending
		w.pending = w.pending[:0]
		w.body(p)
		w.pending = p[:0]
	}
}

// PassHead answers with an upstream's response head as it came (its end-to-end fields, in their
// order; h1wire.Head.WriteFields), instead of through Header and WriteHeader: a proxied response
// that no filter touches then skips the header map, an insert per field and an iteration to write
// them. It takes only what needs no decision from the map: a response with a body framed by
// Content-Length, without trailers, before anything else was set or written (an empty header
// map, no WriteHeader). It commits the header to the connection's buffer at once, so hd is not
// read after it returns. false: nothing was done, and the caller goes the ordinary way.
func (w *Writer) PassHead(hd *h1wire.Head) bool {
	if w.wrote || w.hijack || len(w.hdr) > 0 || w.head || hd.Chunked || hd.Length < 0 ||
		hd.Status < 200 || hd.Status == http.StatusSwitchingProtocols ||
		hd.Status == http.StatusNoContent || hd.Status == http.StatusNotModified {
		return false
	}
	if _, ok := hd.Value("Trailer"); ok {
		return false
	}
	_, w.upDate = hd.Value("Date")
	w.wrote, w.status, w.length, w.up = true, hd.Status, hd.Length, hd
	w.commit(false)
	return true
}

// declaredLength reports whether the handler set a valid Content-Length, which it then takes as
// the response's length.
func (w *Writer) declaredLength() bool {
	if w.length >= 0 {
		return true
	}
	cl := w.hdr["Content-Length"]
	if len(cl) == 0 {
		return false
	}
	n, ok := h1wire.ParseLength([]byte(strings.TrimSpace(cl[0])))
	if ok {
		w.length = n
	}
	return ok
}

// hasTrailers reports whether the handler declared trailers or set some already: then the body
// goes chunked even when short, or they would be lost.
func hasTrailers(h http.Header) bool {
	if _, ok := h["Trailer"]; ok {
		return true
	}
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return true
		}
	}
	return false
}

// body writes p with the chosen framing.
func (w *Writer) body(p []byte) {
	if len(p) == 0 || w.err != nil {
		return
	}
	bw := w.c.bw
	if w.chunked {
		_, _ = bw.WriteString(strconv.FormatInt(int64(len(p)), 16))
		_, _ = bw.WriteString("\r\n")
		_, _ = bw.Write(p)
		_, w.err = bw.WriteString("\r\n")
		return
	}
	_, w.err = bw.Write(p)
}

func (w *Writer) Flush() { _ = w.FlushError() }

// FlushError sends what the handler wrote so far (http.ResponseController uses it).
func (w *Writer) FlushError() error {
	if w.hijack {
		return http.ErrHijacked
	}
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	w.commit(false)
	if w.err == nil {
		w.err = w.c.bw.Flush()
	}
	return w.err
}

// finish completes the response after the handler returned: header if still held, last chunk and
// trailers, flush. It reports whether the connection can carry another request.
func (w *Writer) finish() bool {
	if w.hijack {
		return false
	}
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	w.commit(true)
	bw := w.c.bw
	if w.chunked && w.err == nil {
		_, _ = bw.WriteString("0\r\n")
		w.writeTrailers(bw)
		_, w.err = bw.WriteString("\r\n")
	}
	if w.err == nil {
		w.err = bw.Flush()
	}
	if w.length >= 0 && w.written < w.length && w.bodyAllowed() {
		return false // the client waits for bytes that will never come: close
	}
	return w.err == nil && !w.close
}

func (w *Writer) writeTrailers(bw *bufio.Writer) {
	for k, vv := range w.hdr {
		name, ok := strings.CutPrefix(k, http.TrailerPrefix)
		if !ok {
			continue
		}
		writeField(bw, http.CanonicalHeaderKey(name), vv)
	}
	for _, k := range w.trailer {
		if vv, ok := w.hdr[k]; ok {
			writeField(bw, k, vv)
		}
	}
}

// Hijack hands the connection to the handler (an Upgrade tunnel). Buffered request bytes stay in the
// returned reader.
func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if w.hijack {
		return nil, nil, http.ErrHijacked
	}
	if w.sent {
		return nil, nil, errors.New("hijack after the response started")
	}
	c := w.c
	c.body.close() // no read (and no watch armed by one) after this
	c.unwatchClient()
	c.body.noContinue()
	w.hijack = true
	c.hijacked = true
	c.srv.untrack(c) // Shutdown no longer waits for it, as with net/http
	_ = c.nc.SetDeadline(time.Time{})
	return c.nc, bufio.NewReadWriter(c.br, c.bw), nil
}

func writeStatusLine(bw *bufio.Writer, code int) {
	if code == http.StatusOK {
		_, _ = bw.WriteString("HTTP/1.1 200 OK\r\n")
		return
	}
	_, _ = bw.WriteString("HTTP/1.1 ")
	_, _ = bw.WriteString(strconv.Itoa(code))
	_ = bw.WriteByte(' ')
	text := http.StatusText(code)
	if text == "" {
		text = "status code " + strconv.Itoa(code)
	}
	_, _ = bw.WriteString(text)
	_, _ = bw.WriteString("\r\n")
}

// writeHeaderFields writes the header except trailers-to-be; names that are not tokens are skipped
// and values sanitized (h1wire.WriteValue), so no handler can split the response.
func writeHeaderFields(bw *bufio.Writer, h http.Header) {
	for k, vv := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		writeField(bw, k, vv)
	}
}

func writeField(bw *bufio.Writer, k string, vv []string) {
	if k == "" {
		return
	}
	for i := 0; i < len(k); i++ {
		if !h1wire.IsTokenByte(k[i]) {
			return
		}
	}
	for _, v := range vv {
		_, _ = bw.WriteString(k)
		_, _ = bw.WriteString(": ")
		h1wire.WriteValue(bw, strings.TrimSpace(v))
		_, _ = bw.WriteString("\r\n")
	}
}

// httpDate is the Date header value for t (the request's arrival), formatted once per second.
func httpDate(t time.Time) string {
	now := t.Unix()
	if d := dateCache.Load(); d != nil && d.sec == now {
		return d.s
	}
	d := &cachedDate{sec: now, s: time.Unix(now, 0).UTC().Format(http.TimeFormat)}
	dateCache.Store(d)
	return d.s
}

type cachedDate struct {
	sec int64
	s   string
}

var dateCache atomic.Pointer[cachedDate]
