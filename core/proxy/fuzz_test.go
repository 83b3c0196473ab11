package proxy

import "testing"

// FuzzProxyProtocolHeader frames and parses PROXY protocol headers as a listener that requires them
// does: the framing decision never changes as more bytes arrive (a header is never cut short or
// run past), it never asks for more than the largest header, and a framed header parses or fails
// without panicking.
func FuzzProxyProtocolHeader(f *testing.F) {
	for _, s := range []string{
		"PROXY TCP4 192.0.2.1 192.0.2.2 56324 443\r\nGET /",
		"PROXY TCP6 2001:db8::1 2001:db8::2 1 2\r\n",
		"PROXY UNKNOWN\r\n",
		"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x0c\xc0\x00\x02\x01\xc0\x00\x02\x02\xdc\x04\x01\xbb",
		"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00",
		"GET / HTTP/1.1\r\n",
	} {
		f.Add([]byte(s), true, true)
	}
	f.Fuzz(func(t *testing.T, in []byte, v1, v2 bool) {
		pp := proxyProtocol{v1: v1, v2: v2}
		total, firstErr := 0, error(nil)
		for k := 1; k <= len(in); k++ {
			n, err := proxyHeaderLen(in[:k], pp)
			switch {
			case firstErr != nil:
				if err == nil {
					t.Fatalf("%q: refused at %d bytes, accepted at %d", in, len(in[:k-1]), k)
				}
			case err != nil:
				if total > 0 {
					t.Fatalf("%q: framed as %d bytes, then refused at %d: %v", in, total, k, err)
				}
				firstErr = err
			case total > 0 && n != total:
				t.Fatalf("%q: framed as %d bytes, then %d", in, total, n)
			case n > 0:
				if n > 16+maxV2Header {
					t.Fatalf("%q: framed as %d bytes", in, n)
				}
				total = n
			}
		}
		if firstErr != nil || total == 0 || total > len(in) {
			return
		}
		src, err := proxySource(in[:total])
		if err == nil && src != nil && src.IP == nil {
			t.Fatalf("%q: a source without an IP", in[:total])
		}
	})
}
