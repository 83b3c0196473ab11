package proxy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
)

// h1Body is a request body read off the connection: exactly Content-Length bytes, or chunks (with
// httputil's strict chunk parser) followed by a trailer section that is validated and dropped. On
// the first read of a request that expects it, "100 Continue" is sent.
type h1Body struct {
	c         *h1sConn
	remaining int64     // Content-Length framing: bytes left
	chunks    io.Reader // chunked framing, nil otherwise
	expect    bool      // send 100 Continue before the first read
	done      bool
	err       error
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	if b.expect {
		b.expect = false
		if _, err := b.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err == nil {
			if err := b.c.bw.Flush(); err != nil {
				b.err = err
				return 0, err
			}
		}
	}
	var n int
	var err error
	if b.chunks != nil {
		n, err = b.chunks.Read(p)
		if errors.Is(err, io.EOF) {
			err = b.trailers()
		}
	} else {
		if int64(len(p)) > b.remaining {
			p = p[:b.remaining]
		}
		n, err = b.c.br.Read(p)
		b.remaining -= int64(n)
		if b.remaining == 0 {
			b.done, err = true, io.EOF
		} else if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return n, err
}

// trailers reads the trailer section after the last chunk with the same field checks as the header.
func (b *h1Body) trailers() error {
	var h h1ReqHead
	for {
		s, e, err := h.readLine(b.c.br, b.c.srv.maxHeader)
		if err != nil {
			return io.ErrUnexpectedEOF
		}
		if s == e {
			b.done = true
			return io.EOF
		}
		if _, err := parseField(h.raw, s, e); err != nil {
			return badRequest("malformed trailer field")
		}
	}
}

func (b *h1Body) Close() error { return nil }

// drain reads what the handler left of the body, up to max bytes, so the connection can carry the
// next request; it reports whether it got to the end.
func (b *h1Body) drain(max int64) bool {
	if b.err != nil {
		return false
	}
	if b.done {
		return true
	}
	if b.expect {
		// The client waits for "100 Continue" before sending the body, or may send it anyway:
		// only closing leaves no doubt about what comes next.
		return false
	}
	n, err := io.CopyN(io.Discard, b, max+1)
	return n <= max && errors.Is(err, io.EOF)
}

func (b *h1Body) reset(c *h1sConn, h *h1ReqHead) {
	*b = h1Body{c: c, remaining: h.length, expect: h.expect}
	if h.chunked {
		b.chunks = httputil.NewChunkedReader(c.br)
	} else if h.length <= 0 {
		b.done, b.expect = true, false
	}
}

// requestBody is the Body a request gets: NoBody when it has none, as net/http does.
func requestBody(b *h1Body, h *h1ReqHead) io.ReadCloser {
	if !h.chunked && h.length <= 0 {
		return http.NoBody
	}
	return b
}
