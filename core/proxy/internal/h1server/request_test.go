package h1server

import (
	"bufio"
	"bytes"
	"net/url"
	"testing"
)

func TestParseTargetMatchesNetURL(t *testing.T) {
	for _, target := range []string{
		"/", "/a/b", "/a?x=1&y=2", "/a?", "/a%2Fb", "/%7Euser", "/a b", "/a!b", "/é", "/a;b=c:d@e",
		"*", "http://h.example/p?q", "/a?x=%zz", "/a#frag",
	} {
		var got url.URL
		gotErr := parseTarget(&got, target)
		want, wantErr := url.ParseRequestURI(target)
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("%q: error %v, net/url %v", target, gotErr, wantErr)
			continue
		}
		if wantErr == nil && got.String() != want.String() {
			t.Errorf("%q: %#v, net/url %#v", target, got, *want)
		}
	}
}

// FuzzH1Request checks that any bytes either fail to parse or give one unambiguous request: never
// both framings, a Host on HTTP/1.1, and fields that cannot split anything they are copied into.
func FuzzH1Request(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x?y HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var h reqHead
		if err := h.read(bufio.NewReaderSize(bytes.NewReader(in), 32), 4096, 64); err != nil {
			return
		}
		if h.chunked && h.length >= 0 {
			t.Fatal("both chunked and a length")
		}
		if h.minor == 1 && h.host < 0 {
			t.Fatal("HTTP/1.1 without Host")
		}
		for _, fl := range h.fields {
			if bytes.ContainsAny(h.raw[fl.K0:fl.K1], " \t\r\n:") || bytes.ContainsAny(h.raw[fl.V0:fl.V1], "\r\n\x00") {
				t.Fatalf("bad field %q", h.raw[fl.K0:fl.V1])
			}
		}
		var u url.URL
		_ = parseTarget(&u, string(h.raw[h.t0:h.t1]))
	})
}
