package h1server

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// watchedConn is a conn over a real loopback connection, with its client end, as watchClient and
// its timer see it (a request without a body being served).
func watchedConn(t *testing.T) (*conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	nc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = nc.Close() })
	c := &conn{nc: nc}
	c.src.nc = nc
	c.br = bufio.NewReader(&c.src)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	t.Cleanup(c.cancel)
	return c, client
}

// await polls cond (the timer runs on its own goroutine) until it holds or a few seconds pass.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A request answered before the watch's timer comes by is brief: its fresh reading stands in
// for the clock (Recent) while it runs, and an idle connection's timer stops.
func TestClientWatchBriefRequest(t *testing.T) {
	c, _ := watchedConn(t)
	w := &c.watch
	fresh := time.Now()
	w.early, w.fresh = true, fresh
	c.watchClient()
	if got, ok := (*ClientWatch)(w).Recent(coarseMin); !ok || !got.Equal(fresh) {
		t.Fatalf("Recent = %v, %v while the request is brief; want %v, true", got, ok, fresh)
	}
	if !c.unwatchClient() {
		// The timer can only have come by if this goroutine was descheduled for a whole period.
		t.Skip("descheduled for clientWatchDelay; nothing to check")
	}
	if _, ok := (*ClientWatch)(w).Recent(coarseMin); ok {
		t.Fatal("Recent is still ok after the request ended")
	}
	// Without requests the timer comes by once more and stops.
	await(t, "the idle connection's timer to stop", func() bool { return !w.pending.Load() })
}

// A request that runs through two visits of the timer is watched, and a client going away then
// cancels the connection's context; the request is not brief and Recent says so.
func TestClientWatchLongRequestWatched(t *testing.T) {
	c, client := watchedConn(t)
	w := &c.watch
	w.early, w.fresh = true, time.Now()
	c.watchClient()
	await(t, "the timer to come by once", func() bool { return w.phase.Load() != watchArmed })
	if _, ok := (*ClientWatch)(w).Recent(coarseMin); ok {
		t.Fatal("Recent is ok after the timer came by")
	}
	await(t, "the watch to run", func() bool { return w.phase.Load() == watchRunning })
	_ = client.Close()
	select {
	case <-c.ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the client closed, the context was not cancelled")
	}
	if !w.gone.Load() {
		t.Fatal("gone is not set")
	}
	if c.unwatchClient() {
		t.Fatal("a watched request reported brief")
	}
	if w.phase.Load() != watchIdle {
		t.Fatalf("phase %d after unwatchClient, want idle", w.phase.Load())
	}
}

// A long request whose client stays is watched and then taken back: the serving goroutine gets
// the reader and the socket back, with no read deadline, and a pipelined byte sent meanwhile is
// still there to read.
func TestClientWatchTakenBack(t *testing.T) {
	c, client := watchedConn(t)
	w := &c.watch
	c.watchClient()
	await(t, "the watch to run", func() bool { return w.phase.Load() == watchRunning })
	if c.unwatchClient() {
		t.Fatal("a watched request reported brief")
	}
	if w.gone.Load() {
		t.Fatal("the client is still there, but gone is set")
	}
	if _, err := client.Write([]byte("G")); err != nil {
		t.Fatal(err)
	}
	b, err := c.br.ReadByte()
	if err != nil || b != 'G' {
		t.Fatalf("read %q, %v after the watch; want 'G'", b, err)
	}
	// The next request arms again (the timer was not re-set by the watch that ran).
	c.watchClient()
	if !w.pending.Load() || w.phase.Load() != watchArmed {
		t.Fatalf("next request: pending %v, phase %d; want the timer set and the phase armed", w.pending.Load(), w.phase.Load())
	}
	c.unwatchClient()
}
