// Command l4backend is the upstream of the layer-4 benchmarks (bench/runner l4tcp, l4tls, l4udp):
// a TCP server, the same server behind TLS (the backend of TLS passthrough: it terminates the TLS
// the proxy passed through, ECDSA P-256 certificate, TLS 1.3 only), and a UDP echo.
//
// A stream's first byte chooses what the backend does with it (bench/l4load sends it):
//
//	'e'  echo: everything read (the first byte included) is written back, until EOF
//	'u'  upload sink: everything after the first byte is discarded until EOF; then the backend
//	     writes the count as 8 bytes big-endian and closes, so the client knows every byte arrived
//	'd'  download source: the backend writes a 256 KiB buffer over and over until the write fails
//
// It does the least work it can (one goroutine per connection, plain read/write loops, a 32 KiB
// buffer), so that the proxy in front of it is what the benchmark measures.
package main

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	tcpAddr := flag.String("tcp", "127.0.0.1:18240", "TCP listen address")
	tlsAddr := flag.String("tls", "", "TLS listen address (needs -cert and -key)")
	udpAddr := flag.String("udp", "", "UDP echo listen address")
	certFile := flag.String("cert", "", "PEM certificate of the TLS listener")
	keyFile := flag.String("key", "", "PEM key of the TLS listener")
	flag.Parse()
	if *tcpAddr != "" {
		ln, err := net.Listen("tcp", *tcpAddr)
		if err != nil {
			log.Fatal(err)
		}
		go serve(ln)
	}
	if *tlsAddr != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			log.Fatal(err)
		}
		ln, err := net.Listen("tcp", *tlsAddr)
		if err != nil {
			log.Fatal(err)
		}
		go serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}))
	}
	if *udpAddr != "" {
		pc, err := net.ListenPacket("udp", *udpAddr)
		if err != nil {
			log.Fatal(err)
		}
		go echoUDP(pc.(*net.UDPConn))
	}
	fmt.Fprintln(os.Stderr, "l4backend ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}

func serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			log.Fatal(err)
		}
		go handle(c)
	}
}

// sourceBuf is what download mode writes, over and over.
var sourceBuf = make([]byte, 256<<10)

func handle(c net.Conn) {
	defer func() { _ = c.Close() }()
	buf := make([]byte, 32<<10)
	n, err := c.Read(buf)
	if n == 0 || err != nil && n == 0 {
		return
	}
	switch buf[0] {
	case 'e':
		for {
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
			if n, err = c.Read(buf); err != nil {
				return
			}
		}
	case 'u':
		total := int64(n - 1)
		for {
			m, err := c.Read(buf)
			total += int64(m)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return
			}
		}
		_, _ = c.Write(binary.BigEndian.AppendUint64(nil, uint64(total)))
	case 'd':
		for {
			if _, err := c.Write(sourceBuf); err != nil {
				return
			}
		}
	}
}

// echoUDP sends every datagram back to its sender.
func echoUDP(pc *net.UDPConn) {
	_ = pc.SetReadBuffer(4 << 20)
	_ = pc.SetWriteBuffer(4 << 20)
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := pc.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		_, _ = pc.WriteToUDPAddrPort(buf[:n], addr)
	}
}
