package proxy_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/modules/lb/hash"
)

// serveFixed answers every request on every connection with resp, allocating nothing per request.
func serveFixed(tb testing.TB, resp string) *testBackend {
	return serveEach(tb, "fixed", resp, skipHeader)
}

// serveEach answers resp after each request that skip reads off a connection.
func serveEach(tb testing.TB, name, resp string, skip func(*bufio.Reader) error) *testBackend {
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
				for skip(br) == nil {
					if _, err := c.Write(raw); err != nil {
						return
					}
				}
			}()
		}
	}()
	return &testBackend{name: name, port: portOf(tb, ln.Addr().String())}
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
func BenchmarkH1ProxyAllocs(b *testing.B) { benchH1Proxy(b, func(*irv1.Cluster) {}) }

// BenchmarkH1ProxyFeedback is BenchmarkH1ProxyAllocs with a balancer that implements
// core.BalancerFeedback (lb.test_feedback, whose Done drops the call): the engine's cost of
// reporting each exchange.
func BenchmarkH1ProxyFeedback(b *testing.B) {
	benchH1Proxy(b, func(c *irv1.Cluster) { c.Balancer = &irv1.ModuleConfig{Id: "lb.test_feedback"} })
}

// BenchmarkH1ProxyBreaker is BenchmarkH1ProxyAllocs with a circuit breaker on the cluster: the
// cost of admitting each request and counting it in the breaker's window (same allocs).
func BenchmarkH1ProxyBreaker(b *testing.B) {
	benchH1Proxy(b, func(c *irv1.Cluster) {
		c.CircuitBreaker = &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 10_000, OpenMs: 1000, MinRequests: 5}
	})
}

// BenchmarkH1ProxyTrustedHops is BenchmarkH1ProxyAllocs on a listener that trusts one
// X-Forwarded-For hop (ClientTrafficPolicy), balanced by hash:source-ip so that every request
// resolves its client from the header: resolving it must not allocate.
func BenchmarkH1ProxyTrustedHops(b *testing.B) {
	benchH1ProxyListener(b, func(l *irv1.Listener) {
		l.ClientIpDetection = &irv1.ClientIPDetection{XffNumTrustedHops: 1}
	}, func(c *irv1.Cluster) {
		c.Balancer = core.MustConfig(hash.ModuleID, hash.Config{Key: hash.KeySourceIP})
	}, "X-Forwarded-For: 198.51.100.7, 203.0.113.9\r\n")
}

func benchH1Proxy(b *testing.B, configure func(*irv1.Cluster)) {
	benchH1ProxyListener(b, func(*irv1.Listener) {}, configure, "")
}

func benchH1ProxyListener(b *testing.B, listen func(*irv1.Listener), configure func(*irv1.Cluster), extra string) {
	benchH1ProxyOn(b, newClientProxy(b, proxy.Limits{}), listen, configure, extra)
}

func benchH1ProxyOn(b *testing.B, p *proxy.Proxy, listen func(*irv1.Listener), configure func(*irv1.Cluster), extra string) {
	be := serveFixed(b, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	srv := server("", vhost("example.com", route("httproute/ns/r/rule/0/match/0", "/", backend("fixed", 1))))
	srv.Sources = []string{"ns/gw/http"}
	l := httpListener(0, srv)
	listen(l)
	cl := cluster("fixed", be)
	configure(cl)
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
	benchKeepAliveGET(b, addrOf(b, p, l.Name), extra)
}

// benchKeepAliveGET sends b.N GET requests for example.com, with the extra header lines, on one
// keep-alive connection to addr, and checks each answer is the fixed backend's "ok".
func benchKeepAliveGET(b *testing.B, addr, extra string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	req := []byte("GET /bench?x=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n" + extra + "\r\n")
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

// serveBodies is serveFixed for requests with bodies: it reads each request's header and its body
// (Content-Length or chunked) before answering, allocating nothing per request.
func serveBodies(tb testing.TB, resp string) *testBackend {
	return serveEach(tb, "bodies", resp, skipRequest)
}

// skipRequest reads one request header and discards its body.
func skipRequest(br *bufio.Reader) error {
	length, chunked := int64(0), false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 {
			break
		}
		if k, v, ok := bytes.Cut(line, []byte(":")); ok {
			v = bytes.TrimSpace(v)
			switch {
			case bytes.EqualFold(k, []byte("Content-Length")):
				length, _ = strconv.ParseInt(string(v), 10, 64)
			case bytes.EqualFold(k, []byte("Transfer-Encoding")):
				chunked = bytes.EqualFold(v, []byte("chunked"))
			}
		}
	}
	if !chunked {
		_, err := br.Discard(int(length))
		return err
	}
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimSpace(line), []byte(";"))
		n, err := strconv.ParseInt(string(size), 16, 64)
		if err != nil {
			return err
		}
		if n == 0 {
			return skipHeader(br) // trailers
		}
		if _, err := br.Discard(int(n) + 2); err != nil {
			return err
		}
	}
}

// BenchmarkH1ProxyPost is BenchmarkH1ProxyAllocs for a POST with a body, framed by Content-Length
// or chunked (in 8 KiB chunks), as one client write.
func BenchmarkH1ProxyPost(b *testing.B) {
	be := serveBodies(b, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")
	l := httpListener(0, server("", vhost("example.com", route("r", "/", backend("bodies", 1)))))
	p := newProxy(b)
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cluster("bodies", be)}))
	for _, size := range []int{1 << 10, 64 << 10} {
		for _, chunked := range []bool{false, true} {
			name := strconv.Itoa(size>>10) + "KiB"
			if chunked {
				name += "-chunked"
			}
			b.Run(name, func(b *testing.B) {
				benchPost(b, addrOf(b, p, l.Name), postRequest(size, chunked))
			})
		}
	}
}

func postRequest(size int, chunked bool) []byte {
	body := bytes.Repeat([]byte("x"), size)
	req := []byte("POST /bench HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nContent-Type: application/octet-stream\r\n")
	if !chunked {
		req = append(req, "Content-Length: "+strconv.Itoa(size)+"\r\n\r\n"...)
		return append(req, body...)
	}
	req = append(req, "Transfer-Encoding: chunked\r\n\r\n"...)
	for len(body) > 0 {
		n := min(len(body), 8<<10)
		req = append(req, strconv.FormatInt(int64(n), 16)+"\r\n"...)
		req = append(req, body[:n]...)
		req = append(req, "\r\n"...)
		body = body[n:]
	}
	return append(req, "0\r\n\r\n"...)
}

func benchPost(b *testing.B, addr string, req []byte) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	body := make([]byte, 2)
	b.SetBytes(int64(len(req)))
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
