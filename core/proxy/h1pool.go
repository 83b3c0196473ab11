package proxy

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/sockpeek"
)

// h1Pools holds one keep-alive pool per upstream address ("host:port") and connection policy
// (connpolicy.go). Pools outlive tables, so a snapshot that keeps an endpoint keeps its warm
// connections; pools no table uses any more are closed by sweep. A reaper closes the connections
// idle longer than their pool's idle timeout.
type h1Pools struct {
	mu      sync.Mutex
	pools   map[poolKey]*h1Pool
	asked   map[poolKey]struct{} // pools asked for since the last sweep
	maxIdle int
	every   time.Duration // the reaper's period: half the shortest idle timeout, within bounds
	wake    chan struct{} // tells the reaper its period shrank
	reaping sync.Once
	stop    chan struct{}
	once    sync.Once
}

// poolKey identifies a pool: an address under one connection policy.
type poolKey struct {
	addr string
	pol  connPolicy
}

// The reaper's period bounds: an idle connection is closed between its timeout and half as long
// again after it, but no later than maxReapEvery after it and no sooner than every minReapEvery.
const (
	minReapEvery = 10 * time.Millisecond
	maxReapEvery = 10 * time.Second
)

func newH1Pools(l Limits) *h1Pools {
	return &h1Pools{
		pools:   map[poolKey]*h1Pool{},
		asked:   map[poolKey]struct{}{},
		maxIdle: l.UpstreamMaxIdleConnsPerHost,
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
}

// pool returns the pool of addr under pol, creating it. Called at table build time, never per
// request.
func (ps *h1Pools) pool(addr string, pol connPolicy) *h1Pool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	k := poolKey{addr: addr, pol: pol}
	ps.asked[k] = struct{}{}
	p, ok := ps.pools[k]
	if !ok {
		p = &h1Pool{addr: addr, dialer: pol.dialer(), tls: pol.tls, maxIdle: ps.maxIdle, idleFor: pol.idle}
		ps.pools[k] = p
		ps.reapFor(pol.idle)
	}
	return p
}

// reapFor makes the reaper run often enough for a pool whose idle timeout is idle (ps.mu held).
func (ps *h1Pools) reapFor(idle time.Duration) {
	if idle <= 0 {
		return
	}
	every := min(max(idle/2, minReapEvery), maxReapEvery)
	if ps.every != 0 && ps.every <= every {
		return
	}
	ps.every = every
	ps.reaping.Do(func() { go ps.reap() })
	select {
	case ps.wake <- struct{}{}:
	default:
	}
}

// sweep closes the pools no table build has asked for since the last sweep. The engine calls it
// after a table is swapped in, whose build asked for every pool it uses, so endpoints that come and
// go (pods rescheduled) and policies that change do not leave pools and idle connections behind. A
// retired table's request still holding a swept pool gets its connection closed, not pooled.
func (ps *h1Pools) sweep() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for k, p := range ps.pools {
		if _, ok := ps.asked[k]; !ok {
			delete(ps.pools, k)
			p.close()
		}
	}
	clear(ps.asked)
	// The period may lengthen again once the pool that shortened it is gone (the reaper picks
	// it up after its next run; it never shortens here).
	ps.every = 0
	for _, p := range ps.pools {
		if p.idleFor > 0 {
			ps.every = min(cmp.Or(ps.every, maxReapEvery), max(p.idleFor/2, minReapEvery))
		}
	}
}

// closeAll closes every pool and stops the reaper. A request still running holds its pool: its
// connection is closed instead of pooled when it returns.
func (ps *h1Pools) closeAll() {
	ps.once.Do(func() { close(ps.stop) })
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for k, p := range ps.pools {
		delete(ps.pools, k)
		p.close()
	}
}

func (ps *h1Pools) period() time.Duration {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.every == 0 {
		return maxReapEvery
	}
	return ps.every
}

// reap closes idle connections every period. A shorter period (a new pool's) takes effect at
// once, a longer one after the next run: sweeps, at every snapshot, must not keep pushing the
// next run back.
func (ps *h1Pools) reap() {
	next := time.Now().Add(ps.period())
	t := time.NewTimer(time.Until(next))
	defer t.Stop()
	for {
		select {
		case <-ps.stop:
			return
		case <-ps.wake:
			if at := time.Now().Add(ps.period()); at.Before(next) {
				next = at
				t.Reset(time.Until(next))
			}
		case now := <-t.C:
			ps.mu.Lock()
			pools := make([]*h1Pool, 0, len(ps.pools))
			for _, p := range ps.pools {
				if p.idleFor > 0 {
					pools = append(pools, p)
				}
			}
			ps.mu.Unlock()
			for _, p := range pools {
				p.closeIdleSince(now.Add(-p.idleFor))
			}
			next = now.Add(ps.period())
			t.Reset(time.Until(next))
		}
	}
}

// h1Pool is the LIFO stack of idle keep-alive connections to one address. LIFO keeps the hottest
// connections in use and lets the reaper close the cold ones at the bottom.
type h1Pool struct {
	addr    string
	dialer  *net.Dialer  // bounded by the policy's connect timeout
	tls     *upstreamTLS // the policy's, nil for cleartext
	maxIdle int
	idleFor time.Duration // the policy's idle timeout; 0 keeps idle connections

	mu     sync.Mutex
	idle   []*h1Conn
	closed bool
}

// h1Conn is one upstream connection with its buffers.
type h1Conn struct {
	nc       net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	pool     *h1Pool
	idleFrom time.Time // when it was put back (put); zero when the pool never reaps
	reused   bool      // served a request before this one
	deadline time.Time // armed on nc; zero when none
	peek     sockpeek.Peek
	send     sendWaiter // beneath bw (h1send.go)
}

// alive reports whether a pooled connection is still open and silent: a peek that finds nothing to
// read. An upstream that closed it while idle has sent end of stream, which shows here before a
// request is risked on it.
func (c *h1Conn) alive() bool {
	return c.peek.Silent()
}

// setDeadline arms (or with a zero t, clears) the connection's deadline and remembers it.
func (c *h1Conn) setDeadline(t time.Time) {
	c.deadline = t
	_ = c.nc.SetDeadline(t)
}

const (
	// A 16 KiB body and its header arrive in one read.
	h1ReadBuf  = 32 << 10
	h1WriteBuf = 4 << 10
)

// get returns an idle connection, or dials a new one.
func (p *h1Pool) get(ctx context.Context) (*h1Conn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		c.reused = true
		return c, nil
	}
	p.mu.Unlock()
	return p.dial(ctx)
}

func (p *h1Pool) dial(ctx context.Context) (*h1Conn, error) {
	nc, err := p.tls.dial(ctx, p.dialer, p.addr)
	if err != nil {
		return nil, err
	}
	c := &h1Conn{nc: nc, br: bufio.NewReaderSize(nc, h1ReadBuf), pool: p}
	c.send.init(nc)
	c.bw = bufio.NewWriterSize(&c.send, h1WriteBuf)
	// A TLS connection is peeked (alive) on its socket: by the time it is reused, the records the
	// server sends unasked after the handshake (TLS 1.3 session tickets) came before its first
	// response and were read with it, so anything on the socket of an idle one is its close_notify
	// or its end. A rarer record there (a late ticket) costs a redial, never a request.
	raw := nc
	if tc, ok := nc.(*tls.Conn); ok {
		raw = tc.NetConn()
	}
	if sc, ok := raw.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.peek.Init(rc)
		}
	}
	return c, nil
}

// put returns a connection whose last exchange completed cleanly, idle from now (read by the
// caller, who may have a recent reading at hand; zero when the pool never reaps).
func (p *h1Pool) put(c *h1Conn, now time.Time) {
	c.idleFrom = now
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.maxIdle {
		p.mu.Unlock()
		_ = c.nc.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

func (p *h1Pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		_ = c.nc.Close()
	}
}

// closeIdleSince closes the connections idle since before t (at the bottom of the stack).
func (p *h1Pool) closeIdleSince(t time.Time) {
	p.mu.Lock()
	n := 0
	for n < len(p.idle) && p.idle[n].idleFrom.Before(t) {
		n++
	}
	old := append([]*h1Conn(nil), p.idle[:n]...)
	kept := copy(p.idle, p.idle[n:])
	clear(p.idle[kept:])
	p.idle = p.idle[:kept]
	p.mu.Unlock()
	for _, c := range old {
		_ = c.nc.Close()
	}
}
