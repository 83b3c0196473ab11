package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// h3Client is quic-go's HTTP/3 client against one loopback port, whatever the URL's host (which
// is still the TLS server name), trusting the example's certificates. dials counts the QUIC
// connections it opened.
type h3Client struct {
	*http.Client
	tr    *http3.Transport
	dials atomic.Int64
}

func newH3Client(t *testing.T, port int, roots *x509.CertPool) *h3Client {
	t.Helper()
	c := &h3Client{}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c.tr = &http3.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			c.dials.Add(1)
			return quic.DialAddrEarly(ctx, addr, tlsCfg, cfg)
		},
	}
	c.Client = &http.Client{Transport: c.tr, Timeout: 10 * time.Second}
	t.Cleanup(func() { _ = c.tr.Close() })
	return c
}

// exampleRoots trusts the certificates of examples/http3/certs.
func exampleRoots(t *testing.T) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	for _, name := range []string{"shop.crt", "blog.crt"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "http3", "certs", name))
		if err != nil {
			t.Fatal(err)
		}
		if !pool.AppendCertsFromPEM(b) {
			t.Fatalf("%s: no certificate", name)
		}
	}
	return pool
}

// freeTCPUDPPort returns a loopback port free for both TCP and UDP a moment ago.
func freeTCPUDPPort(t *testing.T) int {
	t.Helper()
	for range 50 {
		p := freePort(t)
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			_ = pc.Close()
			return p
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}

// h3Get is one GET over c, with its echo decoded.
func h3Get(c *http.Client, url string) (*http.Response, *echo, error) {
	resp, err := c.Get(url)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return resp, nil, fmt.Errorf("%s: %d %s", url, resp.StatusCode, body)
	}
	var e echo
	if err := json.Unmarshal(body, &e); err != nil {
		return resp, nil, fmt.Errorf("%s: %v in %s", url, err, body)
	}
	return resp, &e, nil
}

func startHTTP3Example(t *testing.T, extra map[string]string) (*server, int) {
	t.Helper()
	port := freeTCPUDPPort(t)
	files := exampleFiles(t, "http3", map[string]int{
		"port: 8443": port,
		"port: 9391": startBackend(t, "shop").port,
		"port: 9392": startBackend(t, "blog").port,
	})
	for name, content := range extra {
		files[name] = strings.ReplaceAll(content, "PORT", strconv.Itoa(port))
	}
	return startServe(t, files), port
}

// TestExamplesHTTP3 serves examples/http3 with `coxswain serve -f` and talks HTTP/3 to it with
// quic-go's client: each host reaches its backend through its route (the shop's header filter
// included) with its own certificate chosen by SNI, the TCP listener advertises the UDP port in
// Alt-Svc, and a configuration change under HTTP/3 load fails no request and keeps the QUIC
// connections.
func TestExamplesHTTP3(t *testing.T) {
	s, port := startHTTP3Example(t, nil)
	roots := exampleRoots(t)
	c := newH3Client(t, port, roots)
	shop := fmt.Sprintf("https://shop.example.com:%d/cart", port)
	blog := fmt.Sprintf("https://blog.example.com:%d/post", port)
	eventually(t, 10*time.Second, "HTTP/3 served", func() error {
		_, _, err := h3Get(c.Client, shop)
		return err
	})

	t.Run("routing, filter and certificate by SNI", func(t *testing.T) {
		for _, tc := range []struct {
			url, backend, cn, header string
		}{
			{shop, "shop", "shop.example.com", "coxswain"},
			{blog, "blog", "blog.example.com", ""},
		} {
			resp, e, err := h3Get(c.Client, tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ProtoMajor != 3 {
				t.Errorf("%s: protocol %s, want HTTP/3", tc.url, resp.Proto)
			}
			if e.Backend != tc.backend {
				t.Errorf("%s: answered by %q, want %q", tc.url, e.Backend, tc.backend)
			}
			if got := strings.Join(e.Headers["X-Gateway"], ","); got != tc.header {
				t.Errorf("%s: backend saw X-Gateway %q, want %q", tc.url, got, tc.header)
			}
			if cn := resp.TLS.PeerCertificates[0].Subject.CommonName; cn != tc.cn {
				t.Errorf("%s: certificate of %q, want %q", tc.url, cn, tc.cn)
			}
			if resp.Header.Get("Alt-Svc") != "" {
				t.Errorf("%s: an HTTP/3 response advertises Alt-Svc %q", tc.url, resp.Header.Get("Alt-Svc"))
			}
		}
	})

	t.Run("Alt-Svc on HTTP/1.1 and HTTP/2", func(t *testing.T) {
		want := fmt.Sprintf(`h3=":%d"; ma=86400`, port)
		for _, h2 := range []bool{false, true} {
			tr := &http.Transport{
				TLSClientConfig: &tls.Config{RootCAs: roots},
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
				},
				ForceAttemptHTTP2: h2,
			}
			if !h2 {
				tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
			}
			resp, e, err := h3Get(&http.Client{Transport: tr}, shop)
			tr.CloseIdleConnections()
			if err != nil {
				t.Fatal(err)
			}
			if wantMajor := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != wantMajor {
				t.Errorf("protocol %s, want HTTP/%d", resp.Proto, wantMajor)
			}
			if got := resp.Header.Get("Alt-Svc"); got != want {
				t.Errorf("%s Alt-Svc %q, want %q", resp.Proto, got, want)
			}
			if e.Backend != "shop" {
				t.Errorf("%s answered by %q", resp.Proto, e.Backend)
			}
		}
	})

	t.Run("config swap under load", func(t *testing.T) {
		var ok, failed atomic.Int64
		var firstErr atomic.Pointer[string]
		sawNew := make(chan struct{})
		var sawOnce sync.Once
		stop := make(chan struct{})
		var wg sync.WaitGroup
		dialsBefore := c.dials.Load()
		for range 8 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, e, err := h3Get(c.Client, shop)
					if err != nil {
						failed.Add(1)
						msg := err.Error()
						firstErr.CompareAndSwap(nil, &msg)
						continue
					}
					ok.Add(1)
					if strings.Join(e.Headers["X-Gateway"], ",") == "coxswain-v2" {
						sawOnce.Do(func() { close(sawNew) })
					}
				}
			})
		}
		// Let the load run on the old table first, then swap the route's filter.
		eventually(t, 10*time.Second, "load running", func() error {
			if ok.Load() < 200 {
				return fmt.Errorf("%d requests so far", ok.Load())
			}
			return nil
		})
		gw, err := os.ReadFile(filepath.Join(s.dir, "gateway.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		s.replace("gateway.yaml", strings.Replace(string(gw), "{name: X-Gateway, value: coxswain}", "{name: X-Gateway, value: coxswain-v2}", 1))
		select {
		case <-sawNew:
		case <-time.After(20 * time.Second):
			t.Error("the new route never answered")
		}
		atLeast := ok.Load() + 200 // and some more on the new table
		eventually(t, 10*time.Second, "load on the new table", func() error {
			if ok.Load() < atLeast {
				return fmt.Errorf("%d requests so far", ok.Load())
			}
			return nil
		})
		close(stop)
		wg.Wait()
		if n := failed.Load(); n > 0 {
			t.Errorf("%d of %d requests failed across the swap; first: %s", n, n+ok.Load(), *firstErr.Load())
		}
		if d := c.dials.Load() - dialsBefore; d != 0 {
			t.Errorf("the client opened %d new QUIC connections across the swap, want 0 (connections survive swaps)", d)
		}
		t.Logf("%d requests over HTTP/3 across the swap, none failed", ok.Load())
	})
}

// udpConflict is a second Gateway with a UDP listener (and a UDPRoute) on the HTTPS listener's
// port: the UDP socket HTTP/3 would use.
const udpConflict = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: dns
spec:
  gatewayClassName: coxswain
  addresses:
    - type: IPAddress
      value: 127.0.0.1
  listeners:
    - name: udp
      port: PORT
      protocol: UDP
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata:
  name: echo
spec:
  parentRefs: [{name: dns, sectionName: udp}]
  rules:
    - backendRefs: [{name: udp-echo, port: 7}]
---
apiVersion: v1
kind: Service
metadata: {name: udp-echo}
spec:
  ports: [{name: echo, protocol: UDP, port: 7}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: udp-echo
  labels: {kubernetes.io/service-name: udp-echo}
addressType: IPv4
ports: [{name: echo, protocol: UDP, port: UDPECHO}]
endpoints:
- addresses: ["127.0.0.1"]
`

// TestHTTP3UDPRouteConflict puts a UDP listener with a UDPRoute on the port of the example's
// HTTP/3 listener: the UDP listener keeps the port and serves, HTTPS keeps serving over TCP
// without Alt-Svc, and the HTTPS listeners say why in their HTTP3 condition and a problem.
func TestHTTP3UDPRouteConflict(t *testing.T) {
	echoPort := startUDPEcho(t, "dns")
	s, port := startHTTP3Example(t, map[string]string{
		"udp.yaml": strings.ReplaceAll(udpConflict, "UDPECHO", strconv.Itoa(echoPort)),
	})
	eventually(t, 10*time.Second, "UDPPortConflict reported", func() error {
		for _, p := range s.status().Report.Problems {
			if p.Reason == "UDPPortConflict" && p.Object == "Gateway default/web" && strings.Contains(p.Field, "listeners") {
				return nil
			}
		}
		return fmt.Errorf("problems: %+v", s.status().Report.Problems)
	})
	var gw struct {
		Listeners []struct {
			Name       string `json:"name"`
			Conditions []struct {
				Type, Status, Reason, Message string
			} `json:"conditions"`
		} `json:"listeners"`
	}
	body, code, err := s.adminGet("/api/v1/routing/default/web")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/api/v1/routing/default/web: %d %v %s", code, err, body)
	}
	if err := json.Unmarshal([]byte(body), &gw); err != nil {
		t.Fatal(err)
	}
	if len(gw.Listeners) != 2 {
		t.Fatalf("want the two listeners of Gateway web, got %s", body)
	}
	for _, l := range gw.Listeners {
		var found bool
		for _, c := range l.Conditions {
			if c.Type == "coxswain-labs.dev/HTTP3" {
				found = true
				if c.Status != "False" || c.Reason != "UDPPortConflict" || !strings.Contains(c.Message, "default/dns/udp") {
					t.Errorf("listener %s: HTTP3 condition %+v, want False UDPPortConflict naming default/dns/udp", l.Name, c)
				}
			}
			if c.Type == "Programmed" && c.Status != "True" {
				t.Errorf("listener %s is not programmed: %+v", l.Name, c)
			}
		}
		if !found {
			t.Errorf("listener %s has no HTTP3 condition: %+v", l.Name, l.Conditions)
		}
	}
	// The UDP listener serves its route.
	uc, err := net.Dial("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = uc.Close() }()
	eventually(t, 10*time.Second, "UDP echo through the UDPRoute", func() error {
		if _, err := uc.Write([]byte("ping")); err != nil {
			return err
		}
		_ = uc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 64)
		n, err := uc.Read(buf)
		if err != nil {
			return err
		}
		if string(buf[:n]) != "dns ping" {
			return fmt.Errorf("echo %q", buf[:n])
		}
		return nil
	})
	// HTTPS over TCP serves, with no Alt-Svc to a port that does not speak QUIC.
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: exampleRoots(t)},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		},
	}
	defer tr.CloseIdleConnections()
	resp, e, err := h3Get(&http.Client{Transport: tr}, fmt.Sprintf("https://shop.example.com:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	if e.Backend != "shop" {
		t.Errorf("answered by %q", e.Backend)
	}
	if a := resp.Header.Get("Alt-Svc"); a != "" {
		t.Errorf("Alt-Svc %q advertised while UDPRoutes hold the port", a)
	}
}
