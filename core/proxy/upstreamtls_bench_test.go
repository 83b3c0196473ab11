package proxy_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// serveFixedTLS is serveFixed over TLS with a certificate of ca for dns.
func serveFixedTLS(b *testing.B, ca *testCA, resp string, dns ...string) *testBackend {
	b.Helper()
	c, k := ca.issue(b, "fixed", x509.ExtKeyUsageServerAuth, dns)
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	port := portOf(b, ln.Addr().String())
	ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pair}})
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
					if _, err := io.WriteString(c, resp); err != nil {
						return
					}
				}
			}()
		}
	}()
	return &testBackend{name: "fixed", port: port}
}

// BenchmarkH1ProxyUpstreamTLS is BenchmarkH1ProxyAllocs to a TLS backend (a BackendTLSPolicy):
// the cost of the upstream record layer on a pooled connection, the handshake paid once.
func BenchmarkH1ProxyUpstreamTLS(b *testing.B) {
	ca := newTestCA(b, "ca")
	be := serveFixedTLS(b, ca, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok", "fixed.internal")
	l := httpListener(0, server("", vhost("example.com", route("r", "/", backend("fixed", 1)))))
	p := newClientProxy(b, proxy.Limits{})
	cl := tlsCluster("fixed", be, &irv1.UpstreamTLS{ServerName: "fixed.internal", CaPem: ca.pem})
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{cl}))
	benchKeepAliveGET(b, addrOf(b, p, l.Name), "")
}
