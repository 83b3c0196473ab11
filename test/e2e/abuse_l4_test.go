package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAbuseTLSHandshakes attacks an HTTPS (terminating) and a TLS passthrough listener during the
// handshake: ClientHellos that never finish are cut off at --proxy-tls-handshake-timeout, a
// handshake sent one byte per segment completes when it is quick and is cut off when it is slower
// than the timeout, and SNI with bytes no host name has is refused; a normal client is served
// throughout.
func TestAbuseTLSHandshakes(t *testing.T) {
	b := startCountingBackend(t)
	httpPort, httpsPort, passPort := freePort(t), freePort(t), freePort(t)
	files := abuseFiles(t, b, httpPort, httpsPort)
	files["gw.yaml"] += fmt.Sprintf(`  - name: pass
    protocol: TLS
    port: %d
    hostname: "*.pass.example"
    tls: {mode: Passthrough}
`, passPort)
	files["pass.yaml"] = `apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: pass}
spec:
  parentRefs: [{name: gw, sectionName: pass}]
  hostnames: ["*.pass.example"]
  rules: [{backendRefs: [{name: tls-backend, port: 443}]}]
---
` + l4ServiceYAML("tls-backend", "TCP", 443, startTLSEcho(t, "pass-backend"))
	s := startServe(t, files, "--proxy-tls-handshake-timeout", "1s")
	https := fmt.Sprintf("127.0.0.1:%d", httpsPort)
	pass := fmt.Sprintf("127.0.0.1:%d", passPort)
	awaitServed(t, fmt.Sprintf("127.0.0.1:%d", httpPort))
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{ServerName: "abuse.example", InsecureSkipVerify: true}, //nolint:gosec // a self-signed test certificate
	}}
	servedTLS := func(t *testing.T) {
		t.Helper()
		resp, err := client.Get("https://" + https + "/tls")
		if err != nil {
			t.Fatalf("a normal HTTPS client: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("a normal HTTPS client: status %d", resp.StatusCode)
		}
		if cn, line := tlsLine(t, pass, "x.pass.example"); cn != "pass-backend" || line != "pass-backend x.pass.example" {
			t.Fatalf("a normal passthrough client: certificate %q line %q", cn, line)
		}
	}
	eventually(t, 20*time.Second, "HTTPS served", func() error {
		resp, err := client.Get("https://" + https + "/tls")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	})
	servedTLS(t)
	base := s.peakRSS()

	t.Run("ClientHello that never finishes", func(t *testing.T) {
		const n = 200
		// A record header announcing 512 bytes of handshake, and 20 of them.
		partial := append([]byte{0x16, 0x03, 0x01, 0x02, 0x00}, bytes.Repeat([]byte{0x01}, 20)...)
		for _, addr := range []string{https, pass} {
			conns := dialMany(t, addr, n)
			var wg sync.WaitGroup
			lived := make([]time.Duration, n)
			errs := make([]error, n)
			for i, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = c.Write(partial)
					lived[i], errs[i] = awaitClosed(c, 10*time.Second)
				}()
			}
			servedTLS(t)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("%s: connection %d: %v", addr, i, err)
				}
			}
			if longest := slices.Max(lived); longest > 4*time.Second {
				t.Fatalf("%s: an unfinished ClientHello held its connection %s, want about the 1s handshake timeout", addr, longest)
			}
		}
		if got := s.listenerStats(httpsPort, "HTTPS")["tls_handshake_errors"]; got < n {
			t.Errorf("tls_handshake_errors %d, want at least %d", got, n)
		}
		s.reportRSS("unfinished ClientHello (2x200)", base)
	})

	t.Run("one byte per segment", func(t *testing.T) {
		for _, addr := range []string{https, pass} {
			sni := "abuse.example"
			if addr == pass {
				sni = "x.pass.example"
			}
			// Quick: the handshake completes.
			if err := trickleHandshake(addr, sni, 0); err != nil {
				t.Fatalf("%s: a byte-at-a-time handshake: %v", addr, err)
			}
			// Slower than the timeout (2 ms a byte, over a ClientHello of more than a KiB): cut off.
			start := time.Now()
			if err := trickleHandshake(addr, sni, 2*time.Millisecond); err == nil {
				t.Fatalf("%s: a handshake trickling in for %s completed", addr, time.Since(start))
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Fatalf("%s: a trickling handshake held its connection %s", addr, d)
			}
		}
		servedTLS(t)
		s.reportRSS("byte-at-a-time handshakes", base)
	})

	t.Run("SNI with invalid bytes", func(t *testing.T) {
		errs0 := s.listenerStats(httpsPort, "HTTPS")["tls_handshake_errors"]
		for _, bad := range []string{"a\x00b", "a b", "a\xffb", "a\r\nb", "a/b", "..."} {
			for _, addr := range []string{https, pass} {
				name := "abc.abuse.example"
				if addr == pass {
					name = "abc.pass.example"
				}
				hello := clientHello(t, name)
				i := bytes.Index(hello, []byte(name))
				if i < 0 {
					t.Fatal("no SNI in the ClientHello")
				}
				copy(hello[i:], bad) // the same length: the record stays well formed
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = c.Write(hello)
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				reply, err := io.ReadAll(c)
				_ = c.Close()
				if isTimeout(err) {
					t.Fatalf("%s: SNI %q: the connection stayed open", addr, bad)
				}
				// Refused: a TLS alert (record type 21) or a close, never a ServerHello (22).
				if len(reply) > 0 && reply[0] != 0x15 {
					t.Fatalf("%s: SNI %q answered with record type %d", addr, bad, reply[0])
				}
			}
		}
		if got := s.listenerStats(httpsPort, "HTTPS")["tls_handshake_errors"] - errs0; got < 6 {
			t.Errorf("tls_handshake_errors grew by %d, want 6", got)
		}
		servedTLS(t)
		s.reportRSS("invalid SNI", base)
	})
	if n := b.requests.Load(); n == 0 {
		t.Error("the backend saw none of the normal requests")
	}
}

// clientHello returns the first TLS record a Go client sends for serverName.
func clientHello(t *testing.T, serverName string) []byte {
	t.Helper()
	cc, sc := net.Pipe()
	defer sc.Close()
	go func() {
		_ = tls.Client(cc, &tls.Config{ServerName: serverName, InsecureSkipVerify: true}).Handshake() //nolint:gosec // only its ClientHello is used
		_ = cc.Close()
	}()
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(sc, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(sc, body); err != nil {
		t.Fatal(err)
	}
	return append(hdr, body...)
}

// trickleHandshake does a TLS handshake with addr writing one byte per segment, delay apart.
func trickleHandshake(addr, sni string, delay time.Duration) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(&trickleConn{Conn: c, delay: delay}, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // a self-signed test certificate
	return tc.Handshake()
}

// trickleConn writes one byte per Write to its connection (TCP_NODELAY: one segment each).
type trickleConn struct {
	net.Conn
	delay time.Duration
}

func (c *trickleConn) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := c.Conn.Write(p[i : i+1]); err != nil {
			return i, err
		}
		if c.delay > 0 {
			time.Sleep(c.delay)
		}
	}
	return len(p), nil
}

// TestAbuseUDPSourceFlood sends datagrams from many more sources than --proxy-udp-max-sessions:
// the session table stays at the cap, the datagrams beyond it are dropped and counted, a client
// with a session keeps being answered, and memory stays bounded.
func TestAbuseUDPSourceFlood(t *testing.T) {
	udpPort := freeUDPPort(t)
	const limit, sources, rounds = 100, 500, 4
	files := map[string]string{
		"class.yaml": gatewayClassYAML,
		"gw.yaml":    gatewayYAML(listener{name: "udp", protocol: "UDP", port: udpPort}),
		"route.yaml": `apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: dns}
spec:
  parentRefs: [{name: gw, sectionName: udp}]
  rules: [{backendRefs: [{name: udp-a, port: 53}]}]
`,
		"svc.yaml": l4ServiceYAML("udp-a", "UDP", 53, startUDPEcho(t, "udp-a")),
	}
	s := startServe(t, files, "--proxy-udp-max-sessions", fmt.Sprint(limit), "--proxy-udp-session-timeout", "1m")
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: udpPort}
	ask := func(c *net.UDPConn, q string) (string, error) {
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := c.WriteToUDP([]byte(q), to); err != nil {
			return "", err
		}
		buf := make([]byte, 1500)
		n, _, err := c.ReadFromUDP(buf)
		return string(buf[:n]), err
	}
	first, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	eventually(t, 20*time.Second, "UDP served", func() error {
		got, err := ask(first, "hello")
		if err != nil {
			return err
		}
		if got != "udp-a hello" {
			return fmt.Errorf("reply %q", got)
		}
		return nil
	})
	base := s.peakRSS()

	socks := make([]*net.UDPConn, sources)
	for i := range socks {
		// Sources spread over 127.0.0.0/8 as well as over ports.
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, byte(1+i/250), byte(1+i%250))})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		socks[i] = c
	}
	payload := []byte(strings.Repeat("x", 512))
	for range rounds {
		for _, c := range socks {
			_, _ = c.WriteToUDP(payload, to)
		}
		time.Sleep(10 * time.Millisecond) // let the proxy's receive buffer drain between rounds
	}
	eventually(t, 10*time.Second, "the flood counted", func() error {
		st := s.listenerStats(udpPort, "UDP")
		if st["udp_sessions"] > limit {
			return fmt.Errorf("%d sessions, over the cap of %d", st["udp_sessions"], limit)
		}
		if st["udp_sessions"] != limit || st["udp_datagrams_dropped_cap"] < int64(sources-limit) {
			return fmt.Errorf("sessions %d, dropped at the cap %d", st["udp_sessions"], st["udp_datagrams_dropped_cap"])
		}
		return nil
	})
	if got, err := ask(first, "still"); err != nil || got != "udp-a still" {
		t.Fatalf("the client with a session: %q %v", got, err)
	}
	series := fmt.Sprintf(`coxswain_proxy_listener_udp_datagrams_dropped_cap_total{listener="127.0.0.1:%d/UDP"}`, udpPort)
	if got := s.metric(series); got < sources-limit {
		t.Errorf("%s = %v, want at least %d", series, got, sources-limit)
	}
	s.reportRSS("UDP source flood (500 sources)", base)
}
