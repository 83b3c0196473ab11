package proxy_test

import (
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// sink is a TCP backend that discards what it reads and, on "send N" semantics, streams: it writes
// everything it reads back (echo), which makes the proxy move every byte twice.
func newSink(b *testing.B, echo bool) uint32 {
	ln := serveTCP(b, func(c net.Conn) {
		if echo {
			_, _ = io.Copy(c, c)
		} else {
			_, _ = io.Copy(io.Discard, c)
		}
	})
	return portOf(b, ln.Addr().String())
}

// BenchmarkTCPThroughput moves 1 MiB per op through a TCP route to a discarding backend
// (MB/s is the proxy's one-way bulk throughput, spliced on Linux).
func BenchmarkTCPThroughput(b *testing.B) {
	for _, idle := range []time.Duration{-1, time.Hour} {
		name := "idle-timeout-off"
		if idle > 0 {
			name = "idle-timeout-on"
		}
		b.Run(name, func(b *testing.B) {
			port := newSink(b, false)
			l := portKeyed("TCP", 0, l4Route("route.tcp", "r", backend("s", 1)))
			p := newL4Proxy(b, proxy.Limits{StreamIdleTimeout: idle})
			apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("s", irv1.Cluster_TCP, port)}))
			c, err := net.Dial("tcp", addrOf(b, p, l.Name))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			b.ResetTimer()
			for range b.N {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTLSPassthroughThroughput is BenchmarkTCPThroughput through a TLS listener in
// passthrough mode: the client encrypts, the proxy splices ciphertext, the backend decrypts.
func BenchmarkTLSPassthroughThroughput(b *testing.B) {
	be := newTLSEcho(b, "pass")
	l := l4Listener("TLS", 0, passthroughServer("", vhost("", l4Route("route.tls", "r", backend("s", 1)))))
	p := newL4Proxy(b, proxy.Limits{})
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("s", irv1.Cluster_TCP, be.port)}))
	c, err := tls.Dial("tcp", addrOf(b, p, l.Name), &tls.Config{ServerName: "a.example.com", InsecureSkipVerify: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = io.Copy(io.Discard, c) }() // the echo comes back; drain it
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTCPConnectionRate opens, uses (one echo round trip) and closes one connection per op.
func BenchmarkTCPConnectionRate(b *testing.B) {
	port := newSink(b, true)
	l := portKeyed("TCP", 0, l4Route("route.tcp", "r", backend("s", 1)))
	p := newL4Proxy(b, proxy.Limits{})
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("s", irv1.Cluster_TCP, port)}))
	addr := addrOf(b, p, l.Name)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		msg := []byte("ping")
		got := make([]byte, 4)
		for pb.Next() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Write(msg); err != nil {
				b.Error(err)
			}
			if _, err := io.ReadFull(c, got); err != nil {
				b.Error(err)
			}
			_ = c.Close()
		}
	})
}

// BenchmarkTLSPassthroughConnectionRate opens one passthrough connection per op: full TLS
// handshake with the backend through the proxy's ClientHello peek, one line read.
func BenchmarkTLSPassthroughConnectionRate(b *testing.B) {
	be := newTLSEcho(b, "pass")
	l := l4Listener("TLS", 0, passthroughServer("*.example.com", vhost("*.example.com", l4Route("route.tls", "r", backend("s", 1)))))
	p := newL4Proxy(b, proxy.Limits{})
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("s", irv1.Cluster_TCP, be.port)}))
	addr := addrOf(b, p, l.Name)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := tlsGreeting(addr, "a.example.com", nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkUDPPackets sends one datagram per op through a UDP route and waits for its echo, from
// several client sessions at once.
func BenchmarkUDPPackets(b *testing.B) {
	port := newUDPEcho(b, "a")
	l := portKeyed("UDP", 0, l4Route("route.udp", "r", backend("a", 1)))
	p := newL4Proxy(b, proxy.Limits{})
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("a", irv1.Cluster_UDP, port)}))
	paddr, _ := net.ResolveUDPAddr("udp", addrOf(b, p, l.Name))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			b.Error(err)
			return
		}
		defer c.Close()
		msg := make([]byte, 64)
		buf := make([]byte, 1500)
		for pb.Next() {
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.WriteToUDP(msg, paddr); err != nil {
				b.Error(err)
				return
			}
			if _, _, err := c.ReadFromUDP(buf); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkTCPThroughputDirect is the baseline of BenchmarkTCPThroughput: the same client and
// backend without the proxy in between.
func BenchmarkTCPThroughputDirect(b *testing.B) {
	port := newSink(b, false)
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUDPForward blasts b.N 64-byte datagrams from one client through a UDP route to a
// counting backend, without waiting for replies, and reports the delivered rate and the loss
// (UDP drops what a full socket buffer cannot take).
func BenchmarkUDPForward(b *testing.B) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	_ = pc.(*net.UDPConn).SetReadBuffer(8 << 20)
	var got atomic.Int64
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			got.Add(1)
		}
	}()
	l := portKeyed("UDP", 0, l4Route("route.udp", "r", backend("a", 1)))
	p := newL4Proxy(b, proxy.Limits{})
	apply(b, p, snapshot(b, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("a", irv1.Cluster_UDP, portOf(b, pc.LocalAddr().String()))}))
	paddr, _ := net.ResolveUDPAddr("udp", addrOf(b, p, l.Name))
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg := make([]byte, 64)
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := c.WriteToUDP(msg, paddr); err != nil {
			b.Fatal(err)
		}
	}
	// Wait for the tail to drain: until the count stops moving.
	for last := int64(-1); got.Load() != last; {
		last = got.Load()
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(got.Load())/elapsed.Seconds(), "delivered/s")
	b.ReportMetric(100*float64(int64(b.N)-got.Load())/float64(b.N), "%loss")
}
