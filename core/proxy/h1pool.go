package proxy

import (
	"bufio"
	"context"
	"net"
	"sync"
	"syscall"
	"time"
)

// h1Pools holds one keep-alive pool per upstream address ("host:port"). Pools outlive tables, so a
// snapshot that keeps an endpoint keeps its warm connections; pools of addresses the serving table
// no longer uses are closed by sweep.
type h1Pools struct {
	mu      sync.Mutex
	pools   map[string]*h1Pool
	asked   map[string]struct{} // addresses asked for since the last sweep
	dialer  *net.Dialer
	maxIdle int
	idleFor time.Duration // close connections idle longer; 0 keeps them
	stop    chan struct{}
	once    sync.Once
}

func newH1Pools(l Limits) *h1Pools {
	ps := &h1Pools{
		pools:   map[string]*h1Pool{},
		asked:   map[string]struct{}{},
		dialer:  &net.Dialer{Timeout: Positive(l.UpstreamDialTimeout), KeepAlive: 30 * time.Second},
		maxIdle: l.UpstreamMaxIdleConnsPerHost,
		idleFor: Positive(l.UpstreamIdleConnTimeout),
		stop:    make(chan struct{}),
	}
	if ps.idleFor > 0 {
		go ps.reap(min(ps.idleFor/2, 10*time.Second))
	}
	return ps
}

// pool returns the pool of addr, creating it. Called at table build time, never per request.
func (ps *h1Pools) pool(addr string) *h1Pool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.asked[addr] = struct{}{}
	p, ok := ps.pools[addr]
	if !ok {
		p = &h1Pool{addr: addr, dialer: ps.dialer, maxIdle: ps.maxIdle}
		ps.pools[addr] = p
	}
	return p
}

// sweep closes the pools of addresses no table build has asked for since the last sweep. The
// engine calls it after a table is swapped in, whose build asked for every address it uses, so
// endpoints that come and go (pods rescheduled) do not leave pools and idle connections behind.
// A retired table's request still holding a swept pool gets its connection closed, not pooled.
func (ps *h1Pools) sweep() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for addr, p := range ps.pools {
		if _, ok := ps.asked[addr]; !ok {
			delete(ps.pools, addr)
			p.close()
		}
	}
	clear(ps.asked)
}

// closeAll closes every pool and stops the reaper. A request still running holds its pool: its
// connection is closed instead of pooled when it returns.
func (ps *h1Pools) closeAll() {
	ps.once.Do(func() { close(ps.stop) })
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for addr, p := range ps.pools {
		delete(ps.pools, addr)
		p.close()
	}
}

func (ps *h1Pools) reap(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ps.stop:
			return
		case now := <-t.C:
			ps.mu.Lock()
			pools := make([]*h1Pool, 0, len(ps.pools))
			for _, p := range ps.pools {
				pools = append(pools, p)
			}
			ps.mu.Unlock()
			for _, p := range pools {
				p.closeIdleSince(now.Add(-ps.idleFor))
			}
		}
	}
}

// h1Pool is the LIFO stack of idle keep-alive connections to one address. LIFO keeps the hottest
// connections in use and lets the reaper close the cold ones at the bottom.
type h1Pool struct {
	addr    string
	dialer  *net.Dialer
	maxIdle int

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
	idleFrom time.Time
	reused   bool      // served a request before this one
	deadline time.Time // armed on nc; zero when none
	peek     socketPeek
}

// alive reports whether a pooled connection is still open and silent: a peek that finds nothing to
// read. An upstream that closed it while idle has sent end of stream, which shows here before a
// request is risked on it.
func (c *h1Conn) alive() bool {
	p := &c.peek
	if p.rc == nil {
		return true
	}
	return p.check() && !p.data && p.err == nil
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
	nc, err := p.dialer.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	c := &h1Conn{nc: nc, br: bufio.NewReaderSize(nc, h1ReadBuf), bw: bufio.NewWriterSize(nc, h1WriteBuf), pool: p}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.peek.init(rc)
		}
	}
	return c, nil
}

// put returns a connection whose last exchange completed cleanly.
func (p *h1Pool) put(c *h1Conn) {
	c.idleFrom = time.Now()
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
