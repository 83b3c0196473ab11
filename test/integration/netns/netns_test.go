package netns

import (
	"io"
	"net"
	"os"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// An address in Range can be bound and dialed, and the namespace holds nothing but lo.
func TestRangeIsLocal(t *testing.T) {
	ln, err := net.Listen("tcp", "10.99.3.4:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hi"))
			_ = c.Close()
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "hi" {
		t.Fatalf("read %q, %v", b, err)
	}
	ifs, _ := net.Interfaces()
	if len(ifs) != 1 {
		t.Fatalf("interfaces %v, want lo only", ifs)
	}
}
