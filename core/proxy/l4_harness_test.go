package proxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/testmod"
	"github.com/coxswain-labs/coxswain/core/proxy/listener"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
	"github.com/coxswain-labs/coxswain/modules/tcproute"
	"github.com/coxswain-labs/coxswain/modules/tlsroute"
	"github.com/coxswain-labs/coxswain/modules/udproute"
)

// newL4Proxy is a proxy with the layer-4 listeners and route kinds, and the HTTP ones to mix in.
func newL4Proxy(t testing.TB, limits proxy.Limits) *proxy.Proxy {
	t.Helper()
	mods := append(testmod.Modules(), &roundrobin.RoundRobin{}, &listener.HTTP{}, &listener.HTTPS{},
		&listener.TCP{}, &listener.TLS{}, &listener.UDP{}, &tcproute.Route{}, &tlsroute.Route{}, &udproute.Route{})
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: core.NewRegistry(mods...), Limits: limits})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func l4Listener(protocol string, port uint32, servers ...*irv1.Server) *irv1.Listener {
	return &irv1.Listener{Name: "127.0.0.1:" + strconv.Itoa(int(port)) + "/" + protocol, Address: "127.0.0.1",
		Port: port, Protocol: protocol, Servers: servers}
}

// portKeyed is a TCP or UDP listener: one catch-all server and virtual host with routes in order.
func portKeyed(protocol string, port uint32, routes ...*irv1.Route) *irv1.Listener {
	return l4Listener(protocol, port, server("", vhost("", routes...)))
}

func l4Route(id, name string, backends ...*irv1.Backend) *irv1.Route {
	return &irv1.Route{Name: name, Match: &irv1.ModuleConfig{Id: id}, Backends: backends}
}

func l4Cluster(name string, proto irv1.Cluster_Protocol, ports ...uint32) *irv1.Cluster {
	c := &irv1.Cluster{Name: name, Protocol: proto}
	for _, p := range ports {
		c.Endpoints = append(c.Endpoints, &irv1.Endpoint{Address: "127.0.0.1", Port: p, Weight: 1})
	}
	return c
}

func passthroughServer(host string, vhosts ...*irv1.VirtualHost) *irv1.Server {
	s := server(host, vhosts...)
	s.Tls = &irv1.TLS{Mode: irv1.TLS_PASSTHROUGH}
	return s
}

// tcpEcho is a TCP backend: it greets with "<name>\n", echoes what it reads until the client
// half-closes, then says "<name> saw EOF\n" and closes.
type tcpEcho struct {
	name string
	port uint32
	addr string
}

func newTCPEcho(t testing.TB, name string) *tcpEcho {
	t.Helper()
	ln := serveTCP(t, func(c net.Conn) {
		_, _ = io.WriteString(c, name+"\n")
		_, _ = io.Copy(c, c)
		_, _ = io.WriteString(c, name+" saw EOF\n")
	})
	return &tcpEcho{name: name, port: portOf(t, ln.Addr().String()), addr: ln.Addr().String()}
}

// serveTCP is a TCP backend on a loopback port that runs handle on each connection (and closes it
// after); the listener closes and every handler is awaited at the end of the test.
func serveTCP(t testing.TB, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				handle(c)
			})
		}
	})
	return ln
}

// tlsEcho is a TLS backend for passthrough: certificate CN name, greets with "<name> <SNI>\n",
// then echoes.
func newTLSEcho(t testing.TB, name string) *tcpEcho {
	t.Helper()
	certPEM, keyPEM := testmod.Cert(t, name, "*.example.com", "example.com")
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
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
				tc := c.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				if tc.Handshake() != nil {
					return
				}
				_, _ = io.WriteString(c, name+" "+tc.ConnectionState().ServerName+"\n")
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return &tcpEcho{name: name, port: portOf(t, ln.Addr().String()), addr: ln.Addr().String()}
}

// greeting connects to addr and returns the first line, or "" when the connection is closed
// without one (a rejected connection).
func greeting(t testing.TB, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("reading greeting: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "broken pipe"))
}

// tlsGreeting handshakes with sni through addr and returns the peer certificate's CN and the
// first line the backend sent; err is set when the proxy dropped the connection.
func tlsGreeting(addr, sni string, wrap func(net.Conn) net.Conn) (cn, line string, err error) {
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", "", err
	}
	defer raw.Close()
	_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
	c := raw
	if wrap != nil {
		c = wrap(raw)
	}
	tc := tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err := tc.Handshake(); err != nil {
		return "", "", err
	}
	cn = tc.ConnectionState().PeerCertificates[0].Subject.CommonName
	line, err = bufio.NewReader(tc).ReadString('\n')
	return cn, strings.TrimSuffix(line, "\n"), err
}
