package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func readHead(t testing.TB, s string) (*h1Head, error) {
	t.Helper()
	h := &h1Head{}
	err := h.read(bufio.NewReaderSize(strings.NewReader(s), 64))
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

		{"length and chunked", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"chunked and length", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"different lengths", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"length list", "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"signed length", "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"huge length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"other coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"chunked on HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\n\r\n", 0, 0, false, false, errH1Framing},
		{"obs-fold", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"CR inside a value", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"NUL inside a value", "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"no colon", "HTTP/1.1 200 OK\r\nX-A\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"empty name", "HTTP/1.1 200 OK\r\n: a\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"HTTP/2 status line", "HTTP/2 200 OK\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"letters in status", "HTTP/1.1 2x0 OK\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"status below 100", "HTTP/1.1 099 Low\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"no space after status", "HTTP/1.1 200OK\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"control in reason", "HTTP/1.1 200 O\x01K\r\n\r\n", 0, 0, false, false, errH1Malformed},
		{"nothing", "", 0, 0, false, false, errH1NothingRead},
		{"cut in the header", "HTTP/1.1 200 OK\r\nContent-Len", 0, 0, false, false, io.ErrUnexpectedEOF},
		{"header too large", "HTTP/1.1 200 OK\r\nX-A: " + strings.Repeat("a", maxH1Head) + "\r\n\r\n", 0, 0, false, false, errH1TooLarge},
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
			if h.status != tc.status || h.length != tc.length || h.chunked != tc.chunked || h.close != tc.close {
				t.Fatalf("status %d length %d chunked %v close %v", h.status, h.length, h.chunked, h.close)
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
	copyFields(got, h, "")
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

func TestWriteRequest(t *testing.T) {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET /a%2Fb?q=1 HTTP/1.1\r\nHost: example.com\r\n" +
		"Connection: X-Hop, Upgrade\r\nUpgrade: h2c\r\nX-Hop: 1\r\nTE: trailers\r\nProxy-Authorization: x\r\n" +
		"X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Host: evil\r\nForwarded: for=evil\r\nX-Kept: a\r\n\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	r.RemoteAddr = "127.0.0.2:5555"
	r.Header.Set("X-Injected", "a\r\nX-Evil: 1")
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	writeRequest(bw, r, 0)
	_ = bw.Flush()
	out, err := http.ReadRequest(bufio.NewReader(&b))
	if err != nil {
		t.Fatalf("%v in\n%s", err, b.String())
	}
	if out.RequestURI != "/a%2Fb?q=1" || out.Host != "example.com" {
		t.Errorf("request URI %q host %q", out.RequestURI, out.Host)
	}
	checks := map[string]string{
		"X-Hop": "", "Upgrade": "", "Connection": "", "Proxy-Authorization": "", "Forwarded": "",
		"Te": "trailers", "X-Kept": "a", "X-Forwarded-For": "203.0.113.7, 127.0.0.2",
		"X-Forwarded-Host": "example.com", "X-Forwarded-Proto": "http", "X-Evil": "",
		"X-Injected": "a  X-Evil: 1",
	}
	for k, want := range checks {
		if got := strings.Join(out.Header.Values(k), "|"); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
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
		h := &h1Head{}
		if err := h.read(bufio.NewReaderSize(bytes.NewReader(in), 32)); err != nil {
			return
		}
		if h.status < 200 || h.status > 999 {
			t.Fatalf("status %d", h.status)
		}
		if h.chunked && h.length >= 0 {
			t.Fatal("both chunked and a length")
		}
		hdr := http.Header{}
		copyFields(hdr, h, "")
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
