package proxy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
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
			if !allow {
				err := get(http3.MethodGet0RTT)
				// quic-go's client reports the refusal instead of resending; a browser resends.
				if err == nil || !strings.Contains(err.Error(), "0-RTT rejected") {
					t.Fatalf("0-RTT not allowed: the early request got %v, want 0-RTT rejected", err)
				}
				if len(early) != 0 {
					t.Fatal("0-RTT not allowed: the early request reached the backend")
				}
				return
			}
			// RFC 8470 asks for Early-Data: 1 on a request forwarded before the client's handshake
			// completed; on a loaded machine the handshake may complete before the handler runs,
			// and the request then goes without it, rightly. Each attempt is a new resumed
			// connection; one of them must be forwarded early.
			var seen []string
			for range 10 {
				if err := get(http3.MethodGet0RTT); err != nil {
					t.Fatal(err)
				}
				h := <-early
				if !last.ConnectionState().Used0RTT {
					t.Fatalf("0-RTT allowed: the resumed connection did not use 0-RTT (Early-Data %q)", h)
				}
				if h == "1" {
					return
				}
				if h != "" {
					t.Fatalf("0-RTT allowed: Early-Data %q, want \"1\" or none", h)
				}
				seen = append(seen, h)
			}
			t.Errorf("0-RTT allowed: no early request carried Early-Data: 1 in %d attempts", len(seen))
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
