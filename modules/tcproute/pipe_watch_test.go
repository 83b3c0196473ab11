package tcproute

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// tcpPair is a connected loopback pair: the proxy's side and the peer's.
func tcpPair(t *testing.T) (ours, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ours, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ours.Close(); _ = peer.Close() })
	return ours, peer
}

// watchedPipe is a pipe between two real connections whose copy loops last reported progress an
// hour ago, as loops starved by a loaded machine can have, with its watchdog timer not running.
func watchedPipe(t *testing.T) (p *pipe, downPeer net.Conn) {
	t.Helper()
	down, downPeer := tcpPair(t)
	up, _ := tcpPair(t)
	p = &pipe{down: down, up: up}
	p.last.Store(time.Now().Add(-time.Hour).UnixNano())
	timer := time.AfterFunc(time.Hour, func() {})
	t.Cleanup(func() { timer.Stop() })
	p.watchdog.Store(timer)
	return p, downPeer
}

// TestWatchCountsUnreportedData: the client sent a byte the starved copy loops have not read; the
// kernel saw it, so the watchdog must not cut the connection as idle.
func TestWatchCountsUnreportedData(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the kernel's last-data times are read on Linux only")
	}
	const idle = 200 * time.Millisecond
	p, client := watchedPipe(t)
	// Quiet first (the handshake counts as data received), so that the byte below is what counts.
	waitFor(t, "the sockets to be silent for the timeout", func() bool {
		since, ok := sinceLastData(p.down, p.up)
		return ok && since >= idle
	})
	if _, err := client.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	// The byte is in the proxy side's receive buffer once the kernel says so.
	waitFor(t, "the kernel to see the byte", func() bool {
		since, ok := sinceLastData(p.down)
		return ok && since < idle
	})
	p.watch(idle, idle/4)
	if p.idle.Load() {
		t.Fatal("cut as idle while the kernel saw data on the connection within the timeout")
	}
	if since := time.Since(time.Unix(0, p.last.Load())); since >= idle {
		t.Errorf("the watchdog left the last progress %v ago, want the kernel's time", since)
	}
}

// TestWatchCutsWhenTheKernelSawNothing: with the sockets silent for the timeout too, the watchdog
// cuts.
func TestWatchCutsWhenTheKernelSawNothing(t *testing.T) {
	const idle = 50 * time.Millisecond
	p, _ := watchedPipe(t)
	waitFor(t, "the sockets to be silent for the timeout", func() bool {
		since, ok := sinceLastData(p.down, p.up)
		return !ok || since >= idle
	})
	p.watch(idle, idle/4)
	if !p.idle.Load() {
		t.Fatal("an idle connection was not cut")
	}
	if _, err := p.down.Read(make([]byte, 1)); err == nil {
		t.Fatal("the downstream connection is still open")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
