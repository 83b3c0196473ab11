package proxy

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
)

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
