package proxy

import (
	"context"
	"net"
	"testing"
	"time"
)

// The reaper closes a pool's idle connections after the pool's idle timeout even while sweeps
// (one per snapshot) keep coming: they must not push its next run back.
func TestH1ReaperNotPostponedBySweeps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Read(make([]byte, 1)) // returns when the proxy closes its end
		close(closed)
		_ = c.Close()
	}()
	ps := newH1Pools(Limits{UpstreamMaxIdleConnsPerHost: 4})
	defer ps.closeAll()
	pol := connPolicy{connect: time.Second, idle: 200 * time.Millisecond}
	p := ps.pool(ln.Addr().String(), pol)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := p.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p.put(c, start)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
				t.Fatalf("idle connection closed after %v, want after about 200-300ms", d)
			}
			return
		case <-tick.C:
			ps.pool(ln.Addr().String(), pol) // the next table still uses the pool
			ps.sweep()
		case <-ctx.Done():
			t.Fatal("the idle connection was never closed")
		}
	}
}
