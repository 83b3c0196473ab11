package h1wire

import (
	"bufio"
	"errors"
	"io"
)

// ErrBadChunk is a chunked request body whose framing is not RFC 9112 §7.1's.
var ErrBadChunk = errors.New("malformed chunked encoding")

// maxChunkLine bounds a chunk-size line, extensions included (net/http's limit).
const maxChunkLine = 4096

// ChunkedReader decodes a chunked request body from the connection's reader, strictly: the size
// is 1 to 16 hex digits, what follows it is white space and ";" extensions without control
// characters, and every line ends with CRLF. httputil's reader, used before, let control
// characters (a bare CR among them) through in an extension, which a parser behind or in front
// could take for a line end. It stops at the last chunk, leaving the trailer section to
// readTrailers.
type ChunkedReader struct {
	br   *bufio.Reader
	left uint64 // bytes of the current chunk still to read
	data bool   // a chunk's data was read: its CRLF comes next
	err  error
}

func NewChunkedReader(br *bufio.Reader) *ChunkedReader { return &ChunkedReader{br: br} }

func (c *ChunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left == 0 {
		if c.err = c.next(); c.err != nil {
			return 0, c.err
		}
	}
	if uint64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= uint64(n)
	c.data = true
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		c.err = err
		return n, err
	}
	if c.left == 0 && c.br.Buffered() >= 2 {
		// Take the chunk's CRLF now that it is here, as httputil does: a reader that asks
		// whether more of the body is ready (readBody's clientReady) must not see it.
		c.err = c.dataEnd()
	}
	return n, nil
}

// dataEnd reads the CRLF after a chunk's data.
func (c *ChunkedReader) dataEnd() error {
	b0, err0 := c.br.ReadByte()
	b1, err1 := c.br.ReadByte()
	if err0 != nil || err1 != nil {
		return io.ErrUnexpectedEOF
	}
	if b0 != '\r' || b1 != '\n' {
		return ErrBadChunk
	}
	c.data = false
	return nil
}

// next reads the CRLF after the previous chunk's data and the next chunk-size line; io.EOF at
// the last chunk.
func (c *ChunkedReader) next() error {
	if c.data {
		if err := c.dataEnd(); err != nil {
			return err
		}
	}
	line, err := c.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(line) > maxChunkLine:
		return ErrBadChunk
	case errors.Is(err, io.EOF):
		return io.ErrUnexpectedEOF
	case err != nil:
		return err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return ErrBadChunk
	}
	line = line[:len(line)-2]
	var size uint64
	i := 0
	for ; i < len(line) && isHexDigit(line[i]); i++ {
		if i == 16 {
			return ErrBadChunk
		}
		size = size<<4 | uint64(hexValue(line[i]))
	}
	if i == 0 {
		return ErrBadChunk
	}
	for ; i < len(line) && (line[i] == ' ' || line[i] == '\t'); i++ {
	}
	if i < len(line) && line[i] != ';' {
		return ErrBadChunk
	}
	for ; i < len(line); i++ {
		if c := line[i]; c < ' ' && c != '\t' || c == 0x7f {
			return ErrBadChunk
		}
	}
	if size == 0 {
		return io.EOF
	}
	c.left = size
	return nil
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func hexValue(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
