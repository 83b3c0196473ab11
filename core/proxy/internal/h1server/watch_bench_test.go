package h1server

import (
	"bufio"
	"net"
	"testing"
)

// BenchmarkClientWatchArm is what watching for a client that goes away costs a request answered
// before clientWatchDelay (nearly all of them): marking the watch's phase, and setting the
// connection's timer when it is not running already (once a period on a busy connection).
func BenchmarkClientWatchArm(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	c := &conn{nc: nc, br: bufio.NewReader(nc)}
	b.ReportAllocs()
	for b.Loop() {
		c.watchClient()
		c.unwatchClient()
	}
}
