package h1server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/h1wire"
)

// FuzzH1ChunkedBody decodes a chunked request body the way the HTTP/1.1 server does
// (h1wire.ChunkedReader, then readTrailers) and checks it against a strict RFC 9112 §7.1 decoder: a body
// the server accepts must be one the strict decoder accepts with the same data, ending at the same
// byte, so that the request after it starts where every other parser would start it.
func FuzzH1ChunkedBody(f *testing.F) {
	for _, s := range []string{
		"0\r\n\r\n",
		"3\r\nabc\r\n0\r\n\r\n",
		"3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\n",
		"A\r\n0123456789\r\n00\r\n\r\n",
		"3 \r\nabc\r\n0\r\n\r\n",
		"3\nabc\r\n0\r\n\r\n",
		"zz\r\nabc\r\n0\r\n\r\n",
		"3\r\nabc\r\n0\r\nX-A : 1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		cr := &countingReader{r: bytes.NewReader(in)}
		br := bufio.NewReaderSize(cr, 16)
		data, err := io.ReadAll(h1wire.NewChunkedReader(br))
		if err != nil {
			return
		}
		var h reqHead
		if err := readTrailers(&h, br, 4096); !errors.Is(err, io.EOF) {
			return
		}
		consumed := cr.n - br.Buffered()
		want, wantEnd, ok := strictChunked(in)
		if !ok {
			t.Fatalf("accepted %q, which RFC 9112 does not", in[:consumed])
		}
		if !bytes.Equal(data, want) || consumed != wantEnd {
			t.Fatalf("%q: decoded %q ending at %d, strict decoder %q ending at %d", in, data, consumed, want, wantEnd)
		}
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// strictChunked decodes a chunked body by RFC 9112 §7.1, with the one leniency the server shares
// with net/http and which cannot move the end of the body: white space (BWS) before a chunk line's
// CRLF. It returns the data and the offset just past the body.
func strictChunked(in []byte) ([]byte, int, bool) {
	var data []byte
	i := 0
	line := func() ([]byte, bool) {
		j := bytes.Index(in[i:], []byte("\r\n"))
		if j < 0 {
			return nil, false
		}
		l := in[i : i+j]
		if bytes.ContainsAny(l, "\r\n") {
			return nil, false
		}
		i += j + 2
		return l, true
	}
	for {
		l, ok := line()
		if !ok {
			return nil, 0, false
		}
		k := 0
		var size uint64
		for k < len(l) && isHex(l[k]) {
			if k >= 16 {
				return nil, 0, false
			}
			size = size<<4 | uint64(unhex(l[k]))
			k++
		}
		if k == 0 {
			return nil, 0, false
		}
		rest := bytes.TrimLeft(l[k:], " \t")
		if len(rest) > 0 && rest[0] != ';' {
			return nil, 0, false
		}
		for _, c := range rest {
			if c < ' ' && c != '\t' || c == 0x7f {
				return nil, 0, false
			}
		}
		if size == 0 {
			break
		}
		if uint64(len(in)-i) < size+2 {
			return nil, 0, false
		}
		data = append(data, in[i:i+int(size)]...)
		i += int(size)
		if !bytes.HasPrefix(in[i:], []byte("\r\n")) {
			return nil, 0, false
		}
		i += 2
	}
	for {
		l, ok := line()
		if !ok {
			return nil, 0, false
		}
		if len(l) == 0 {
			return data, i, true
		}
		name, value, found := bytes.Cut(l, []byte(":"))
		if !found || !httpguts.ValidHeaderFieldName(string(name)) || !httpguts.ValidHeaderFieldValue(string(value)) {
			return nil, 0, false
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}
