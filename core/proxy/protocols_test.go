package proxy_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// sniCN completes a TLS handshake with the given SNI ("" sends none) and returns the leaf's CN.
func sniCN(t *testing.T, addr, sni string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("handshake with SNI %q: %v", sni, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestHTTPS(t *testing.T) {
	ok := newBackend(t, "ok", nil)
	secrets := []*irv1.Secret{
		secret(t, "ns/a", "a", "a.example.com"),
		secret(t, "ns/wild", "wild", "*.example.com"),
		secret(t, "ns/default", "default", "default.test"),
	}
	to := backend("ok", 1)
	withCatchAll := httpsListener(0,
		tlsServer("a.example.com", []string{"ns/a"}, vhost("a.example.com", route("r/a", "/", to))),
		tlsServer("*.example.com", []string{"ns/wild"}, vhost("*.example.com", route("r/wild", "/", to))),
		tlsServer("", []string{"ns/default"}, vhost("", route("r/default", "/", to))),
	)
	noCatchAllPort := closedPort(t)
	noCatchAll := httpsListener(noCatchAllPort,
		tlsServer("a.example.com", []string{"ns/a"}, vhost("a.example.com", route("r/a", "/", to))),
		tlsServer("*.example.com", []string{"ns/wild"}, vhost("*.example.com", route("r/wild", "/", to))),
	)
	clusters := []*irv1.Cluster{cluster("ok", ok)}
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{withCatchAll, noCatchAll}, clusters, secrets...))
	addr := addrOf(t, p, withCatchAll.Name)
	addr2 := addrOf(t, p, noCatchAll.Name)

	cases := []struct {
		name, addr, sni, want string
	}{
		{"exact SNI", addr, "a.example.com", "a"},
		{"SNI matching a wildcard", addr, "b.example.com", "wild"},
		{"SNI matching a wildcard by several labels", addr, "x.y.example.com", "wild"},
		{"SNI case-insensitive", addr, "A.Example.com", "a"},
		{"unknown SNI takes the catch-all server", addr, "other.org", "default"},
		{"no SNI takes the catch-all server", addr, "", "default"},
		{"no SNI and no catch-all takes the first server", addr2, "", "a"},
		{"unknown SNI and no catch-all takes the first server", addr2, "other.org", "a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := sniCN(t, tc.addr, tc.sni); got != tc.want {
				t.Fatalf("certificate %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("HTTP/2 by ALPN", func(t *testing.T) {
		c := newClient(addr, func(tr *http.Transport) { tr.ForceAttemptHTTP2 = true })
		r := must(t, c.get(hostURL("https", "a.example.com", "/")))
		if r.proto != 2 || r.header.Get("X-Backend") != "ok" || r.peerCN != "a" {
			t.Fatalf("proto %d backend %q cert %q", r.proto, r.header.Get("X-Backend"), r.peerCN)
		}
		if got := r.header.Get("X-Got-XF-Proto"); got != "https" {
			t.Errorf("X-Forwarded-Proto %q, want https", got)
		}
	})
	t.Run("HTTP/1.1 by ALPN", func(t *testing.T) {
		r := must(t, newClient(addr, nil).get(hostURL("https", "b.example.com", "/")))
		if r.proto != 1 || r.peerCN != "wild" {
			t.Fatalf("proto %d cert %q", r.proto, r.peerCN)
		}
	})
	t.Run("TLS 1.1 refused", func(t *testing.T) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true,
			MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11})
		if err == nil {
			conn.Close()
			t.Fatal("TLS 1.1 handshake accepted")
		}
	})

	t.Run("certificate reload", func(t *testing.T) {
		c := newClient(addr, nil)
		if r := must(t, c.get(hostURL("https", "a.example.com", "/"))); r.peerCN != "a" {
			t.Fatalf("cert %q", r.peerCN)
		}
		renewed := append([]*irv1.Secret{secret(t, "ns/a", "a-renewed", "a.example.com")}, secrets[1:]...)
		apply(t, p, snapshot(t, []*irv1.Listener{withCatchAll, noCatchAll}, clusters, renewed...))
		if got := sniCN(t, addr, "a.example.com"); got != "a-renewed" {
			t.Fatalf("new handshake got %q, want the renewed certificate", got)
		}
		r := must(t, c.get(hostURL("https", "a.example.com", "/")))
		if r.peerCN != "a" || c.dials.Load() != 1 {
			t.Fatalf("established connection changed: cert %q, %d dials", r.peerCN, c.dials.Load())
		}
		if got := addrOf(t, p, withCatchAll.Name); got != addr {
			t.Fatalf("socket rebound on a certificate change: %s → %s", addr, got)
		}
	})
}

func TestH2C(t *testing.T) {
	h1 := newBackend(t, "h1", nil)
	h2 := newH2CBackend(t, "h2c")
	h2c := cluster("grpc", h2)
	h2c.Protocol = irv1.Cluster_H2C
	l := httpListener(0, server("", vhost("",
		route("r/h2c", "/grpc", backend("grpc", 1)),
		route("r/h1", "/", backend("h1", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("h1", h1), h2c}))
	addr := addrOf(t, p, l.Name)

	priorKnowledge := newClient(addr, func(tr *http.Transport) {
		var pr http.Protocols
		pr.SetUnencryptedHTTP2(true)
		tr.Protocols = &pr
	})
	t.Run("downstream prior knowledge", func(t *testing.T) {
		r := must(t, priorKnowledge.get(hostURL("http", "example.com", "/")))
		if r.proto != 2 || r.header.Get("X-Backend") != "h1" || r.header.Get("X-Got-Proto") != "HTTP/1.1" {
			t.Fatalf("proto %d backend %q upstream proto %q", r.proto, r.header.Get("X-Backend"), r.header.Get("X-Got-Proto"))
		}
	})
	t.Run("upstream h2c cluster", func(t *testing.T) {
		for _, c := range []*client{priorKnowledge, newClient(addr, nil)} {
			r := must(t, c.get(hostURL("http", "example.com", "/grpc")))
			if r.status != 200 || r.header.Get("X-Got-Proto") != "HTTP/2.0" {
				t.Fatalf("status %d upstream proto %q", r.status, r.header.Get("X-Got-Proto"))
			}
		}
	})
}

func TestStreamingFlush(t *testing.T) {
	release := make(chan struct{})
	sse := newBackend(t, "sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	l := httpListener(0, server("", vhost("", route("r", "/", backend("sse", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("sse", sse)}))
	c := newClient(addrOf(t, p, l.Name), nil)
	resp, err := c.Get(hostURL("http", "example.com", "/events"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The first event must arrive while the backend still holds the stream open.
	if line, err := br.ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "data: two") {
		t.Fatalf("rest of stream %q", rest)
	}
}

func TestForwarding(t *testing.T) {
	dump := newBackend(t, "dump", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "websocket" {
			tunnel(t, w)
			return
		}
		for _, h := range []string{"X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Hop", "Keep-Alive", "X-End", "Upgrade", "Http2-Settings"} {
			w.Header().Set("Got-"+h, strings.Join(r.Header.Values(h), "|"))
		}
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Checksum", "abc")
	})
	l := httpListener(0, server("", vhost("", route("r", "/", backend("dump", 1)))))
	p := newProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("dump", dump)}))
	addr := addrOf(t, p, l.Name)
	c := newClient(addr, nil)

	r := must(t, c.get(hostURL("http", "example.com", "/h"),
		"X-Forwarded-For", "203.0.113.7", "Connection", "X-Hop", "X-Hop", "secret", "Keep-Alive", "timeout=5", "X-End", "kept"))
	checks := map[string]string{
		"Got-X-Forwarded-For":   "203.0.113.7, 127.0.0.1",
		"Got-X-Forwarded-Proto": "http",
		"Got-X-Forwarded-Host":  "example.com",
		"Got-X-Hop":             "", // named in Connection: hop-by-hop
		"Got-Keep-Alive":        "",
		"Got-X-End":             "kept",
	}
	for h, want := range checks {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if r.body != "body" || r.trailer.Get("X-Checksum") != "abc" {
		t.Errorf("body %q trailer %v", r.body, r.trailer)
	}

	t.Run("h2c upgrade is not tunnelled", func(t *testing.T) {
		r := must(t, c.get(hostURL("http", "example.com", "/h2c"),
			"Connection", "Upgrade, HTTP2-Settings", "Upgrade", "h2c", "HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"))
		if r.status != 200 || r.header.Get("Got-Upgrade") != "" || r.header.Get("Got-Http2-Settings") != "" {
			t.Fatalf("status %d, upstream saw Upgrade %q settings %q", r.status, r.header.Get("Got-Upgrade"), r.header.Get("Got-Http2-Settings"))
		}
	})
	t.Run("upgrade tunnels", func(t *testing.T) {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		_, _ = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: example.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade response %v, %v", resp, err)
		}
		_, _ = io.WriteString(conn, "ping\n")
		if line, err := br.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo %q, %v", line, err)
		}
	})
}

// tunnel answers an Upgrade and echoes lines over the hijacked connection.
func tunnel(t *testing.T, w http.ResponseWriter) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	defer conn.Close()
	_, _ = io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	_ = brw.Flush()
	line, err := brw.ReadString('\n')
	if err != nil {
		return
	}
	_, _ = io.WriteString(brw, line)
	_ = brw.Flush()
}
