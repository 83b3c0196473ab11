package compression

import (
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
)

// brotliWindow is log2 of the brotli window: 512 KiB, as nginx's brotli module uses, rather than
// the library's 4 MiB, which would be the memory of every pooled encoder.
const brotliWindow = 19

// encoder is what gzip.Writer and brotli.Writer have in common.
type encoder interface {
	io.WriteCloser
	Flush() error
	Reset(io.Writer)
}

// Encoders are pooled by coding and level: a gzip writer is about 800 KiB of tables to allocate
// and a brotli one more, so a fresh one per response would dominate the cost of small bodies.
var (
	gzipPools   [10]sync.Pool
	brotliPools [10]sync.Pool
)

func pool(e encoding, level int) *sync.Pool {
	if e == brotliEnc {
		return &brotliPools[level]
	}
	return &gzipPools[level]
}

func getEncoder(e encoding, level int, w io.Writer) encoder {
	if v := pool(e, level).Get(); v != nil {
		enc := v.(encoder)
		enc.Reset(w)
		return enc
	}
	if e == brotliEnc {
		return brotli.NewWriterOptions(w, brotli.WriterOptions{Quality: level, LGWin: brotliWindow})
	}
	gz, err := gzip.NewWriterLevel(w, level)
	if err != nil { // level is 1 to 9 (Provision), which gzip accepts
		panic(err)
	}
	return gz
}

// putEncoder returns enc to its pool, pointed at io.Discard so that the pool keeps no response.
func putEncoder(e encoding, level int, enc encoder) {
	enc.Reset(io.Discard)
	pool(e, level).Put(enc)
}

// heldPool recycles the buffers that hold the start of a body of unknown length back until
// MinSize decides; the larger ones (a MinSize above heldMax) are not kept.
var heldPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

const heldMax = 64 << 10

// state is where a response is in the decision.
type state uint8

const (
	stNew    state = iota // nothing written yet
	stHold                // compressible, length unknown: the body is held until MinSize decides
	stEncode              // compressing
	stPass                // sent as it is
)

// writer is the response writer of a wrapped request. The decision is made at the status:
// compress (stEncode), not (stPass) or, for a compressible body of unknown length, hold up to
// MinSize bytes back and decide on them (stHold). It keeps the engine's Flush (an SSE stream's
// events go out as they are written) and unwraps to the engine's writer for
// http.ResponseController.
type writer struct {
	c      *Compression
	w      http.ResponseWriter
	enc    encoding // the client's coding; identity: only Vary is added
	st     state
	status int
	held   *[]byte
	e      encoder
}

var _ http.Flusher = (*writer)(nil)

func (cw *writer) Header() http.Header { return cw.w.Header() }

// Unwrap is for http.ResponseController (deadlines, Hijack of an upgrade the engine passed
// through).
func (cw *writer) Unwrap() http.ResponseWriter { return cw.w }

func (cw *writer) WriteHeader(code int) {
	if cw.st != stNew {
		return
	}
	if code < 200 { // 1xx are sent as they are; 101 hands the connection over
		cw.w.WriteHeader(code)
		if code == http.StatusSwitchingProtocols {
			cw.st = stPass
		}
		return
	}
	cw.status = code
	h := cw.w.Header()
	ct := h["Content-Type"]
	if len(ct) == 0 || skip(code, h) || !cw.c.compressible(ct[0]) {
		cw.pass()
		return
	}
	length := int64(-1)
	if cl := h["Content-Length"]; len(cl) == 1 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil && n >= 0 {
			length = n
		}
	}
	if length >= 0 && length < cw.c.minSize {
		cw.pass() // too small for anybody: it does not vary
		return
	}
	addVary(h)
	switch {
	case cw.enc == identity:
		cw.pass()
	case length >= 0 || cw.c.minSize == 0 || eventStream(ct[0]):
		cw.encode()
	default:
		cw.st = stHold
	}
}

// pass sends the status and header as they are; the body follows unchanged.
func (cw *writer) pass() {
	cw.st = stPass
	cw.w.WriteHeader(cw.status)
}

// encode sends the header of a compressed response and starts the encoder.
func (cw *writer) encode() {
	h := cw.w.Header()
	delete(h, "Content-Length")
	delete(h, "Accept-Ranges") // ranges of the compressed bytes are not served
	h["Content-Encoding"] = cw.enc.value()
	weakenETag(h)
	cw.st = stEncode
	cw.w.WriteHeader(cw.status)
	cw.e = getEncoder(cw.enc, cw.c.level, cw.w)
}

func (cw *writer) Write(p []byte) (int, error) {
	if cw.st == stNew {
		cw.WriteHeader(http.StatusOK)
	}
	switch cw.st {
	case stEncode:
		return cw.e.Write(p)
	case stHold:
		if cw.held == nil {
			cw.held = heldPool.Get().(*[]byte)
		}
		if int64(len(*cw.held)+len(p)) < cw.c.minSize {
			*cw.held = append(*cw.held, p...)
			return len(p), nil
		}
		cw.encode()
		if err := cw.release(true); err != nil {
			return 0, err
		}
		return cw.e.Write(p)
	}
	return cw.w.Write(p)
}

// release writes the held bytes (when write) to the encoder or as they are, and returns the
// buffer to its pool.
func (cw *writer) release(write bool) error {
	if cw.held == nil {
		return nil
	}
	var err error
	if b := *cw.held; write && len(b) > 0 {
		if cw.st == stEncode {
			_, err = cw.e.Write(b)
		} else {
			_, err = cw.w.Write(b)
		}
	}
	if cap(*cw.held) <= heldMax {
		*cw.held = (*cw.held)[:0]
		heldPool.Put(cw.held)
	}
	cw.held = nil
	return err
}

// Flush sends what was written so far. Bytes held back are sent as they are: a handler that
// flushes before MinSize bytes is streaming, and its bytes must not wait for more. A Flush with
// nothing written yet is deferred to the first byte, so that the header can still say whether
// the body is compressed.
func (cw *writer) Flush() {
	if cw.st == stNew {
		cw.WriteHeader(http.StatusOK)
	}
	switch cw.st {
	case stHold:
		if cw.held == nil || len(*cw.held) == 0 {
			return
		}
		cw.pass()
		if cw.release(true) != nil {
			return
		}
	case stEncode:
		if cw.e.Flush() != nil {
			return
		}
	}
	if f, ok := cw.w.(http.Flusher); ok {
		f.Flush()
	}
}

// finish ends the body once the handler returned: a held body goes out as it is, an encoder
// writes its end and goes back to its pool.
func (cw *writer) finish() {
	switch cw.st {
	case stHold:
		cw.pass()
		_ = cw.release(true)
	case stEncode:
		_ = cw.e.Close()
		putEncoder(cw.enc, cw.c.level, cw.e)
		cw.e = nil
	}
}

// abandon gives back what the writer holds without writing: the handler panicked.
func (cw *writer) abandon() {
	_ = cw.release(false)
	if cw.e != nil {
		putEncoder(cw.enc, cw.c.level, cw.e)
		cw.e = nil
	}
}
