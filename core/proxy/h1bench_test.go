package proxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// serveFixed answers every request on every connection with resp, allocating nothing per request.
func serveFixed(tb testing.TB, resp string) *testBackend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ln.Close() })
	raw := []byte(resp)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for skipHeader(br) == nil {
					if _, err := c.Write(raw); err != nil {
						return
					}
				}
			}()
		}
	}()
	return &testBackend{name: "fixed", port: portOf(tb, ln.Addr().String())}
}

func skipHeader(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			return nil
		}
	}
}

// BenchmarkH1ProxyAllocs is one keep-alive GET through the HTTP/1.1 server, routing and the
// upstream fast path, with a client and a backend that allocate nothing: allocs/op is what the
// proxy allocates per request: 5 today, a header string and its value slice each way, and the
// balancer's PickInfo (route.go).
func BenchmarkH1ProxyAllocs(b *testing.B) {
	be := serveFixed(b, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	l := httpListener(0, server("", vhost("example.com", route("r", "/", backend("fixed", 1)))))
	p := newProxy(b)
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cluster("fixed", be)}))
	c, err := net.Dial("tcp", addrOf(b, p, l.Name))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	req := []byte("GET /bench?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	body := make([]byte, 2)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if err := skipHeader(br); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(br, body); err != nil || string(body) != "ok" {
			b.Fatalf("%q %v", body, err)
		}
	}
}
