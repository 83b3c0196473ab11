package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestL4Routes runs `coxswain serve` with TCPRoutes, TLSRoutes (a passthrough and a terminating
// listener on one port) and a UDPRoute, and checks traffic and status end to end.
func TestL4Routes(t *testing.T) {
	tcpA, tcpB := startTCPEcho(t, "tcp-a"), startTCPEcho(t, "tcp-b")
	tlsBackend := startTLSEcho(t, "pass-backend")
	udpBackend := startUDPEcho(t, "udp-a")
	tcpPort, tlsPort, udpPort := freePort(t), freePort(t), freeUDPPort(t)
	cert, key := selfSigned(t, "term.example.com")

	gw := fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: coxswain
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners:
  - {name: tcp, protocol: TCP, port: %d}
  - name: pass
    protocol: TLS
    port: %d
    hostname: "*.pass.example.com"
    tls: {mode: Passthrough}
  - name: term
    protocol: TLS
    port: %[2]d
    hostname: term.example.com
    tls: {mode: Terminate, certificateRefs: [{name: term-cert}]}
  - {name: udp, protocol: UDP, port: %d}
`, tcpPort, tlsPort, udpPort)
	routes := `apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: older, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw, sectionName: tcp}]
  rules: [{backendRefs: [{name: tcp-a, port: 9000}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: newer, creationTimestamp: "2024-06-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw, sectionName: tcp}]
  rules: [{backendRefs: [{name: tcp-b, port: 9000}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: pass}
spec:
  parentRefs: [{name: gw}]
  hostnames: ["*.pass.example.com"]
  rules: [{backendRefs: [{name: tls-backend, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: term}
spec:
  parentRefs: [{name: gw, sectionName: term}]
  hostnames: [term.example.com]
  rules: [{backendRefs: [{name: tcp-b, port: 9000}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: dns}
spec:
  parentRefs: [{name: gw, sectionName: udp}]
  rules: [{backendRefs: [{name: udp-a, port: 53}]}]
`
	services := strings.Join([]string{
		l4ServiceYAML("tcp-a", "TCP", 9000, tcpA), l4ServiceYAML("tcp-b", "TCP", 9000, tcpB),
		l4ServiceYAML("tls-backend", "TCP", 443, tlsBackend), l4ServiceYAML("udp-a", "UDP", 53, udpBackend),
	}, "---\n")
	s := startServe(t, map[string]string{
		"class.yaml": gatewayClassYAML, "gw.yaml": gw, "routes.yaml": routes, "services.yaml": services,
		"secret.yaml": tlsSecretYAML("term-cert", cert, key),
	})

	t.Run("the oldest TCPRoute serves the port", func(t *testing.T) {
		for range 5 {
			if g := tcpGreeting(t, fmt.Sprintf("127.0.0.1:%d", tcpPort)); g != "tcp-a" {
				t.Fatalf("greeting %q, want tcp-a", g)
			}
		}
	})
	t.Run("passthrough and terminate on one port", func(t *testing.T) {
		addr := fmt.Sprintf("127.0.0.1:%d", tlsPort)
		cn, line := tlsLine(t, addr, "x.pass.example.com")
		if cn != "pass-backend" || line != "pass-backend x.pass.example.com" {
			t.Errorf("passthrough: certificate %q line %q", cn, line)
		}
		cn, line = tlsLine(t, addr, "term.example.com")
		if cn != "term.example.com" || line != "tcp-b" {
			t.Errorf("terminate: certificate %q line %q", cn, line)
		}
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "other.example.com", InsecureSkipVerify: true})
		if err == nil {
			c.Close()
			t.Error("an SNI no listener serves was answered")
		}
	})
	t.Run("UDP sessions", func(t *testing.T) {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: udpPort}
		buf := make([]byte, 1500)
		for i := range 3 {
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.WriteToUDP(fmt.Appendf(nil, "q%d", i), to); err != nil {
				t.Fatal(err)
			}
			n, from, err := c.ReadFromUDP(buf)
			if err != nil {
				t.Fatalf("no UDP reply: %v", err)
			}
			if got := string(buf[:n]); got != fmt.Sprintf("udp-a q%d", i) || from.Port != udpPort {
				t.Fatalf("reply %q from %v", got, from)
			}
		}
	})
	t.Run("listener counters", func(t *testing.T) {
		body, code, err := s.adminGet("/stats")
		if err != nil || code != 200 {
			t.Fatalf("/stats: %d %v", code, err)
		}
		var stats map[string]map[string]int64
		if err := json.Unmarshal([]byte(body), &stats); err != nil {
			t.Fatal(err)
		}
		udp := stats[fmt.Sprintf("127.0.0.1:%d/UDP", udpPort)]
		tls := stats[fmt.Sprintf("127.0.0.1:%d/TLS", tlsPort)]
		if udp["udp_sessions_opened"] != 1 || tls["stream_connections_dropped"] < 1 {
			t.Errorf("counters %s", body)
		}
	})
	t.Run("status", func(t *testing.T) {
		body, _, err := s.adminGet("/status")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Report struct {
				Routes []struct {
					Kind, Name string
					Status     struct {
						Parents []struct {
							Conditions []struct{ Type, Status, Reason string }
						}
					}
				}
				Gateways []struct {
					Status struct {
						Listeners []struct {
							Name           string
							AttachedRoutes int
							SupportedKinds []struct{ Kind string }
						}
					}
				}
				Failures []string
			}
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Report.Failures) > 0 {
			t.Errorf("failures: %v", st.Report.Failures)
		}
		conds := map[string]string{}
		for _, r := range st.Report.Routes {
			for _, p := range r.Status.Parents {
				for _, c := range p.Conditions {
					conds[r.Kind+"/"+r.Name+"/"+c.Type] = c.Status + "/" + c.Reason
				}
			}
		}
		for key, want := range map[string]string{
			"TCPRoute/older/Accepted":   "True/Accepted",
			"TCPRoute/newer/Accepted":   "True/Accepted",
			"TCPRoute/newer/Conflicted": "True/ShadowedByOlderRoute",
			"TLSRoute/pass/Accepted":    "True/Accepted",
			"TLSRoute/term/Accepted":    "True/Accepted",
			"UDPRoute/dns/Accepted":     "True/Accepted",
		} {
			if conds[key] != want {
				t.Errorf("%s = %q, want %q", key, conds[key], want)
			}
		}
		if _, ok := conds["TCPRoute/older/Conflicted"]; ok {
			t.Error("the older TCPRoute is marked Conflicted")
		}
		attached := map[string]int{}
		for _, l := range st.Report.Gateways[0].Status.Listeners {
			attached[l.Name] = l.AttachedRoutes
			if len(l.SupportedKinds) != 1 {
				t.Errorf("listener %s supportedKinds %v", l.Name, l.SupportedKinds)
			}
		}
		if attached["tcp"] != 2 || attached["pass"] != 1 || attached["term"] != 1 || attached["udp"] != 1 {
			t.Errorf("attachedRoutes %v", attached)
		}
	})
}

// TestL4Example keeps examples/l4 valid.
func TestL4Example(t *testing.T) {
	out, errOut, code := runCLI(t, "validate", "-f", filepath.Join("..", "..", "examples", "l4"))
	if code != 0 || !strings.Contains(errOut, "1 TCPRoute(s), 2 TLSRoute(s), 1 UDPRoute(s)") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func l4ServiceYAML(name, protocol string, port, target int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s}
spec:
  ports: [{name: p, protocol: %[2]s, port: %[3]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s
  labels: {kubernetes.io/service-name: %[1]s}
addressType: IPv4
ports: [{name: p, protocol: %[2]s, port: %[4]d}]
endpoints: [{addresses: [127.0.0.1]}]
`, name, protocol, port, target)
}

func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// serveConns accepts on ln until the test ends, running h per connection.
func serveConns(t *testing.T, ln net.Listener, h func(net.Conn)) int {
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				h(c)
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func startTCPEcho(t *testing.T, name string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveConns(t, ln, func(c net.Conn) {
		_, _ = io.WriteString(c, name+"\n")
		_, _ = io.Copy(c, c)
	})
}

func startTLSEcho(t *testing.T, name string) int {
	certPEM, keyPEM := selfSigned(t, name)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	return serveConns(t, ln, func(c net.Conn) {
		tc := c.(*tls.Conn)
		if tc.Handshake() != nil {
			return
		}
		_, _ = io.WriteString(c, name+" "+tc.ConnectionState().ServerName+"\n")
		_, _ = io.Copy(c, c)
	})
}

func startUDPEcho(t *testing.T, name string) int {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(append([]byte(name+" "), buf[:n]...), from)
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

func tcpGreeting(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

func tlsLine(t *testing.T, addr, sni string) (cn, line string) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		t.Fatalf("SNI %s: %v", sni, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	line, _ = bufio.NewReader(c).ReadString('\n')
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, strings.TrimSpace(line)
}
