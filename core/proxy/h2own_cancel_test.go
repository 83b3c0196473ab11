package proxy_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// An HTTP/2 client that cancels its request (RST_STREAM) while the upstream holds the answer
// cancels the upstream request, through either inbound HTTP/2 server: the own server's stream
// runs the exchange's abort itself (its reset watch), a route timeout's derived context and
// net/http's server go through context.AfterFunc. The cancelled upstream connection is not
// pooled: the next request dials.
func TestH2StreamResetCancelsUpstream(t *testing.T) {
	cases := []struct {
		name    string
		server  string
		tls     bool
		timeout uint32 // route request timeout in ms: the request's context is derived
		path    string
	}{
		{name: "own h2c", server: proxy.HTTP2Own, path: "/hang"},
		{name: "own h2c streamed", server: proxy.HTTP2Own, path: "/stream"},
		{name: "own TLS", server: proxy.HTTP2Own, tls: true, path: "/hang"},
		{name: "own route timeout", server: proxy.HTTP2Own, timeout: 30_000, path: "/hang"},
		{name: "stdlib h2c", server: proxy.HTTP2Stdlib, path: "/hang"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			be := newCancelBackend(t)
			rt := route("r", "/", backend("cb", 1))
			if tc.timeout > 0 {
				rt.Timeouts = &irv1.Timeouts{RequestMs: tc.timeout}
			}
			var l *irv1.Listener
			var secrets []*irv1.Secret
			if tc.tls {
				l = httpsListener(0, tlsServer("", []string{"ns/c"}, vhost("", rt)))
				secrets = append(secrets, secret(t, "ns/c", "c", "example.com"))
			} else {
				l = httpListener(0, server("", vhost("", rt)))
			}
			p := newClientProxy(t, proxy.Limits{HTTP2Server: tc.server})
			apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("cb", be.testBackend)}, secrets...))
			c := h2Client(t, tc.tls)
			base := scheme(tc.tls) + "://" + addrOf(t, p, l.Name)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+tc.path, nil)
			req.Host = "example.com"
			got := make(chan error, 1)
			go func() {
				resp, err := c.Do(req)
				if err == nil {
					if resp.ProtoMajor != 2 {
						t.Errorf("proto %s, want HTTP/2", resp.Proto)
					}
					_, err = io.ReadAll(resp.Body) // a streamed answer: the header came, the body hangs
					_ = resp.Body.Close()
				}
				got <- err
			}()
			await(t, "the request upstream", be.arrived)
			cancel()
			await(t, "the upstream request's cancellation", be.canceled)
			select {
			case err := <-got:
				if err == nil {
					t.Fatal("the cancelled request succeeded")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the cancelled request did not end")
			}

			before := be.conns.Load()
			okReq, _ := http.NewRequest(http.MethodGet, base+"/ok", nil)
			okReq.Host = "example.com"
			resp, err := c.Do(okReq)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "ok " {
				t.Fatalf("next request: %d %q", resp.StatusCode, body)
			}
			if n := be.conns.Load(); n != before+1 {
				t.Fatalf("upstream connections %d -> %d: the cancelled one was reused", before, n)
			}
		})
	}
}

// h2Client speaks HTTP/2 only: h2c with prior knowledge, or TLS with ALPN h2.
func h2Client(t *testing.T, useTLS bool) *http.Client {
	var pr http.Protocols
	tr := &http.Transport{}
	if useTLS {
		pr.SetHTTP2(true)
		tr.TLSClientConfig = &tls.Config{ServerName: "example.com", InsecureSkipVerify: true} //nolint:gosec // test
	} else {
		pr.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = &pr
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}
