package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// BenchmarkH1ProxySticky is BenchmarkH1ProxyAllocs (one keep-alive GET through the whole engine,
// against backends that allocate nothing) with the cluster's session persistence: none, a request
// carrying a valid session cookie (among two others), and a request carrying the session header,
// at 1 and 10 endpoints. A pinned request allocates no more than one without persistence (one
// less: the balancer's PickInfo is not made).
func BenchmarkH1ProxySticky(b *testing.B) {
	const resp = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
	for _, mode := range []string{"none", "cookie", "header"} {
		for _, n := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				var bs []*testBackend
				for range n {
					bs = append(bs, serveFixed(b, resp))
				}
				cl := cluster("fixed", bs...)
				extra := ""
				switch mode {
				case "cookie":
					sticky(cl, irv1.SessionPersistence_COOKIE, sessCookie)
					extra = "Cookie: theme=dark; " + sessCookie + "=" + wantToken(sessKey, bs[n/2].port) + "; lang=en\r\n"
				case "header":
					sticky(cl, irv1.SessionPersistence_HEADER, "X-Session")
					extra = "X-Session: user-12345\r\n"
				}
				l := httpListener(0, server("", vhost("example.com", route("r", "/", backend("fixed", 1)))))
				p := newProxy(b)
				apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
				c, err := net.Dial("tcp", addrOf(b, p, l.Name))
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
			})
		}
	}
}
