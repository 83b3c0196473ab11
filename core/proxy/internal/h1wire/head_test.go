package h1wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func readHead(t testing.TB, s string) (*Head, error) {
	t.Helper()
	h := &Head{}
	err := h.Read(bufio.NewReaderSize(strings.NewReader(s), 64))
	return h, err
}

func TestH1HeadFraming(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		status  int
		length  int64
		chunked bool
		close   bool
		err     error
	}{
		{"content length", "HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", 200, 12, false, false, nil},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 200, -1, true, false, nil},
		{"chunked any case", "HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n", 200, -1, true, false, nil},
		{"no framing", "HTTP/1.1 200 OK\r\n\r\n", 200, -1, false, false, nil},
		{"no reason phrase", "HTTP/1.1 204\r\n\r\n", 204, -1, false, false, nil},
		{"bare LF line endings", "HTTP/1.1 200 OK\nContent-Length: 1\n\n", 200, 1, false, false, nil},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n", 200, 0, false, true, nil},
		{"HTTP/1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 200, 0, false, true, nil},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", 200, 0, false, false, nil},
		{"repeated equal lengths", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", 200, 3, false, false, nil},
		{"interim responses skipped", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 200, 0, false, false, nil},
		{"long header line", "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("a", 500) + "\r\nContent-Length: 0\r\n\r\n", 200, 0, false, false, nil},

		{"length and chunked", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"chunked and length", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"different lengths", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"length list", "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"signed length", "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"huge length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"other coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"chunked on HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\n\r\n", 0, 0, false, false, ErrFraming},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"CR inside a value", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"NUL inside a value", "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"no colon", "HTTP/1.1 200 OK\r\nX-A\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"empty name", "HTTP/1.1 200 OK\r\n: a\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"HTTP/2 status line", "HTTP/2 200 OK\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"letters in status", "HTTP/1.1 2x0 OK\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"status below 100", "HTTP/1.1 099 Low\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"no space after status", "HTTP/1.1 200OK\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"control in reason", "HTTP/1.1 200 O\x01K\r\n\r\n", 0, 0, false, false, ErrMalformed},
		{"nothing", "", 0, 0, false, false, ErrNothingRead},
		{"cut in the header", "HTTP/1.1 200 OK\r\nContent-Len", 0, 0, false, false, io.ErrUnexpectedEOF},
		{"header too large", "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("a", MaxHead) + "\r\n\r\n", 0, 0, false, false, ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, err := readHead(t, tc.in)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Status != tc.status || h.Length != tc.length || h.Chunked != tc.chunked || h.Close != tc.close {
				t.Fatalf("status %d length %d chunked %v close %v", h.Status, h.Length, h.Chunked, h.Close)
			}
		})
	}
}

func TestH1CopyFields(t *testing.T) {
	h, err := readHead(t, "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nX-Multi: 1\r\nx-multi: 2\r\n"+
		"Connection: X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\nTrailer: X-Sum\r\nContent-Length:  7 \r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	got := http.Header{}
	h.CopyFields(got, "")
	want := http.Header{
		"Content-Type":   {"text/plain"},
		"X-Multi":        {"1", "2"},
		"Trailer":        {"X-Sum"},
		"Content-Length": {"7"},
	}
	if len(got) != len(want) {
		t.Fatalf("header %v, want %v", got, want)
	}
	for k, v := range want {
		if strings.Join(got[k], "|") != strings.Join(v, "|") {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// FuzzH1Head checks that any upstream bytes either fail to parse or give a header whose framing is
// unambiguous and whose fields cannot split the response they are copied into.
func FuzzH1Head(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n",
		"HTTP/1.0 304 Not Modified\r\nConnection: keep-alive\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		h := &Head{}
		if err := h.Read(bufio.NewReaderSize(bytes.NewReader(in), 32)); err != nil {
			return
		}
		if h.Status < 200 || h.Status > 999 {
			t.Fatalf("status %d", h.Status)
		}
		if h.Chunked && h.Length >= 0 {
			t.Fatal("both chunked and a length")
		}
		hdr := http.Header{}
		h.CopyFields(hdr, "")
		for k, vv := range hdr {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") {
				t.Fatalf("bad name %q", k)
			}
			for _, v := range vv {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("bad value %q", v)
				}
			}
		}
	})
}
