package proxy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

func newHTTP3Proxy(t *testing.T) *proxy.Proxy {
	t.Helper()
	mods := append(testmod.Modules(), &roundrobin.RoundRobin{}, &listener.HTTP{}, &listener.HTTPS{}, &listener.HTTP3{})
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: core.NewRegistry(mods...)})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// tcpUDPPort is a loopback port free for TCP and UDP a moment ago: HTTP/3 binds the HTTPS
// listener's own port, which an ephemeral port 0 cannot give both sockets.
func tcpUDPPort(t *testing.T) uint32 {
	t.Helper()
	for range 50 {
		p := closedPort(t)
		pc, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(int(p)))
		if err == nil {
			_ = pc.Close()
			return p
		}
	}
	t.Fatal("no port free for TCP and UDP")
	return 0
}

// h3Snapshot is one HTTPS listener on port for example.com, with HTTP/3 when h3 is set.
func h3Snapshot(t *testing.T, port uint32, be *testBackend, sec *irv1.Secret, h3 *irv1.HTTP3) *irv1.Snapshot {
	t.Helper()
	l := httpsListener(port, tlsServer("example.com", []string{"cert"}, vhost("", route("r", "/", backend("be", 1)))))
	l.Http3 = h3
	return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("be", be)}, sec)
}

func boundNames(p *proxy.Proxy) []string {
	var out []string
	for _, b := range p.Bound() {
		out = append(out, b.Name)
	}
	return out
}

// TestHTTP3Socket: the IR listener's http3 binds a UDP socket named <address>:<port>/HTTP3
// beside the HTTPS one and serves the same routes over QUIC; turning it off closes only that
// socket, and the HTTPS listener's Alt-Svc follows.
func TestHTTP3Socket(t *testing.T) {
	p := newHTTP3Proxy(t)
	port := tcpUDPPort(t)
	be := newBackend(t, "be", nil)
	sec := secret(t, "cert", "example.com", "example.com")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(sec.CertificatePem)
	addr := "127.0.0.1:" + strconv.Itoa(int(port))
	tcp := newClient(addr, func(tr *http.Transport) { tr.TLSClientConfig = &tls.Config{RootCAs: roots} })

	apply(t, p, h3Snapshot(t, port, be, sec, &irv1.HTTP3{AdvertisedPort: 443}))
	want := []string{addr + "/HTTP3", addr + "/HTTPS"}
	if got := boundNames(p); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("bound %v, want %v", got, want)
	}
	r := must(t, tcp.get("https://example.com/x"))
	if a := r.header.Get("Alt-Svc"); a != `h3=":443"; ma=86400` {
		t.Errorf("Alt-Svc %q, want the advertised port 443", a)
	}
	tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: roots},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, addr, tc, qc)
		}}
	defer func() { _ = tr.Close() }()
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://example.com/over-quic")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 3 || !strings.Contains(string(body), "be") {
		t.Errorf("HTTP/3 GET: %s %d %q", resp.Proto, resp.StatusCode, body)
	}

	apply(t, p, h3Snapshot(t, port, be, sec, nil))
	if got := boundNames(p); len(got) != 1 || got[0] != addr+"/HTTPS" {
		t.Errorf("bound %v after HTTP/3 was turned off, want only the HTTPS socket", got)
	}
	if a := must(t, tcp.get("https://example.com/x")).header.Get("Alt-Svc"); a != "" {
		t.Errorf("Alt-Svc %q without HTTP/3", a)
	}
	if pc, err := net.ListenPacket("udp", addr); err != nil {
		t.Errorf("the UDP port is still taken after HTTP/3 was turned off: %v", err)
	} else {
		_ = pc.Close()
	}
}

// TestHTTP3ZeroRTT: a resumed connection sends a GET in 0-RTT early data. With allow_0rtt the
// server takes it and the backend sees Early-Data: 1; without, the early data is refused and
// the request never reaches the backend.
func TestHTTP3ZeroRTT(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run("allow_0rtt="+strconv.FormatBool(allow), func(t *testing.T) {
			p := newHTTP3Proxy(t)
			port := tcpUDPPort(t)
			early := make(chan string, 4)
			be := newBackend(t, "be", func(w http.ResponseWriter, r *http.Request) {
				early <- r.Header.Get("Early-Data")
				_, _ = io.WriteString(w, "ok")
			})
			sec := secret(t, "cert", "example.com", "example.com")
			apply(t, p, h3Snapshot(t, port, be, sec, &irv1.HTTP3{Allow_0Rtt: allow}))
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(sec.CertificatePem)
			addr := "127.0.0.1:" + strconv.Itoa(int(port))
			cache := tls.NewLRUClientSessionCache(4)
			var last *quic.Conn
			get := func(method string) error {
				t.Helper()
				tr := &http3.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ClientSessionCache: cache},
					Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
						c, err := quic.DialAddrEarly(ctx, addr, tc, qc)
						last = c
						return c, err
					}}
				defer func() { _ = tr.Close() }()
				req, _ := http.NewRequest(method, "https://example.com/", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					return err
				}
				_, _ = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d", method, resp.StatusCode)
				}
				return nil
			}
			if err := get(http.MethodGet); err != nil { // a full handshake; the server sends a session ticket
				t.Fatal(err)
			}
			if h := <-early; h != "" {
				t.Errorf("first request carried Early-Data %q", h)
			}
			// The ticket arrives after the handshake: resume once it is in the cache.
			eventually(t, "session ticket", func() bool {
				_, ok := cache.Get("example.com")
				return ok
			})
			err := get(http3.MethodGet0RTT)
			if !allow {
				// quic-go's client reports the refusal instead of resending; a browser resends.
				if err == nil || !strings.Contains(err.Error(), "0-RTT rejected") {
					t.Fatalf("0-RTT not allowed: the early request got %v, want 0-RTT rejected", err)
				}
				if len(early) != 0 {
					t.Fatal("0-RTT not allowed: the early request reached the backend")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h, used := <-early, last.ConnectionState().Used0RTT; !used || h != "1" {
				t.Errorf("0-RTT allowed: used 0-RTT %v, Early-Data %q; want true, \"1\"", used, h)
			}
		})
	}
}

// TestHTTP3BindFailure: a UDP port taken by another process leaves the HTTPS listener serving
// and lists the HTTP/3 socket among the failed ones; once the port is free the retry binds it.
func TestHTTP3BindFailure(t *testing.T) {
	p := newHTTP3Proxy(t)
	port := tcpUDPPort(t)
	addr := "127.0.0.1:" + strconv.Itoa(int(port))
	squatter, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	be := newBackend(t, "be", nil)
	sec := secret(t, "cert", "example.com", "example.com")
	apply(t, p, h3Snapshot(t, port, be, sec, &irv1.HTTP3{}))
	failed := p.Failed()
	if len(failed) != 1 || failed[0].Name != addr+"/HTTP3" {
		_ = squatter.Close()
		t.Fatalf("failed %+v, want the HTTP/3 socket only", failed)
	}
	if got := boundNames(p); len(got) != 1 || got[0] != addr+"/HTTPS" {
		t.Errorf("bound %v, want the HTTPS socket", got)
	}
	_ = squatter.Close()
	eventually(t, "HTTP/3 socket bound by the retry", func() bool { return len(p.Failed()) == 0 && len(p.Bound()) == 2 })
}

// udpRecorder relays datagrams between one client and addr, recording the client's Initial and
// 0-RTT packets: what an attacker on the path needs to replay a 0-RTT request.
type udpRecorder struct {
	pc     net.PacketConn
	mu     sync.Mutex
	flight [][]byte
}

func newUDPRecorder(t *testing.T, addr string) *udpRecorder {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close(); _ = up.Close() })
	r := &udpRecorder{pc: pc}
	var client atomic.Pointer[net.Addr]
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			client.Store(&from)
			if n > 0 && buf[0]&0x80 != 0 && (buf[0]&0x30)>>4 <= 1 { // a long header: Initial or 0-RTT
				r.mu.Lock()
				r.flight = append(r.flight, bytes.Clone(buf[:n]))
				r.mu.Unlock()
			}
			_, _ = up.Write(buf[:n])
		}
	}()
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := up.Read(buf)
			if err != nil {
				return
			}
			if c := client.Load(); c != nil {
				_, _ = pc.WriteTo(buf[:n], *c)
			}
		}
	}()
	return r
}

// replay sends the recorded first flight to addr again from a new socket, as an attacker who
// captured it would; nothing answers the server, so that handshake never completes.
func (r *udpRecorder) replay(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.flight) == 0 {
		t.Fatal("no first flight recorded")
	}
	for _, d := range r.flight {
		_, _ = c.Write(d)
	}
}

// TestHTTP3ZeroRTTReplay replays a resumed connection's first flight, 0-RTT request included,
// from another address: a replayed GET is served again (marked Early-Data: 1, which is why
// 0-RTT is opt-in), a replayed POST never reaches the backend, because it waits for a handshake
// that a replay cannot complete.
func TestHTTP3ZeroRTTReplay(t *testing.T) {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			p := newHTTP3Proxy(t)
			port := tcpUDPPort(t)
			var hits atomic.Int64
			var sawEarly atomic.Bool
			be := newBackend(t, "be", func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				sawEarly.Store(sawEarly.Load() || r.Header.Get("Early-Data") == "1")
				_, _ = io.WriteString(w, "ok")
			})
			sec := secret(t, "cert", "example.com", "example.com")
			apply(t, p, h3Snapshot(t, port, be, sec, &irv1.HTTP3{Allow_0Rtt: true}))
			roots := x509.NewCertPool()
			roots.AppendCertsFromPEM(sec.CertificatePem)
			server := "127.0.0.1:" + strconv.Itoa(int(port))
			cache := tls.NewLRUClientSessionCache(4)
			tlsCfg := &tls.Config{RootCAs: roots, ServerName: "example.com", ClientSessionCache: cache, NextProtos: []string{http3.NextProtoH3}}

			// A full handshake, for a session ticket.
			first := &http3.Transport{TLSClientConfig: tlsCfg.Clone(),
				Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
					return quic.DialAddrEarly(ctx, server, tc, qc)
				}}
			resp, err := (&http.Client{Transport: first}).Get("https://example.com/")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			_ = first.Close()
			eventually(t, "session ticket", func() bool { _, ok := cache.Get("example.com"); return ok })

			// The resumed connection, through the recorder, with the request in 0-RTT.
			rec := newUDPRecorder(t, server)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn, err := quic.DialAddrEarly(ctx, rec.pc.LocalAddr().String(), tlsCfg.Clone(), &quic.Config{})
			if err != nil {
				t.Fatal(err)
			}
			cc := (&http3.Transport{}).NewClientConn(conn)
			str, err := cc.OpenRequestStream(ctx)
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(ctx, method, "https://example.com/pay", nil)
			if err := str.SendRequestHeader(req); err != nil {
				t.Fatal(err)
			}
			_ = str.Close()
			if resp, err = str.ReadResponse(); err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if !conn.ConnectionState().Used0RTT {
				t.Fatal("the resumed connection did not use 0-RTT")
			}
			_ = conn.CloseWithError(0, "")
			if hits.Load() != 2 {
				t.Fatalf("backend hits %d after the genuine requests, want 2", hits.Load())
			}

			// The server keeps the closed connection's IDs a while (answering with its close), so
			// the replay is sent again until the server takes it as a new connection.
			accepted := func() int64 { return p.ListenerStats()[server+"/HTTP3"]["quic_connections_accepted"] }
			before := accepted()
			deadline := time.Now().Add(15 * time.Second)
			for accepted() == before {
				if time.Now().After(deadline) {
					t.Fatal("the server never accepted the replayed connection")
				}
				rec.replay(t, server)
				time.Sleep(100 * time.Millisecond)
			}
			if method == http.MethodGet {
				eventually(t, "replayed GET served", func() bool { return hits.Load() == 3 })
				if !sawEarly.Load() {
					t.Error("no request reached the backend marked Early-Data: 1")
				}
				return
			}
			// The replayed POST is held for a handshake that never completes: nothing to await,
			// so a bounded window (a replayed GET is served within milliseconds, above).
			time.Sleep(time.Second)
			if n := hits.Load(); n != 2 {
				t.Errorf("backend hits %d after the replay, want 2: a replayed POST was served", n)
			}
		})
	}
}
