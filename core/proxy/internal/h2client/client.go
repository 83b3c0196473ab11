// Package h2client is the proxy's own HTTP/2 client for h2c clusters (cleartext HTTP/2 with prior
// knowledge: Service appProtocol kubernetes.io/h2c, gRPC; or over the cluster's TLS), built on
// golang.org/x/net/http2's Framer and HPACK. core/proxy's h2c forwarder is its one user.
//
// It replaces http.Transport's HTTP/2 client on that path because that one writes and flushes
// every frame on its own from a goroutine per request: under gRPC load that was a third of the
// proxy's CPU in write system calls and goroutine hand-offs.
//
// The shape of a call, and why:
//
//   - Pool.Open takes a stream slot on the least busy connection to the endpoint (a new one past
//     the peer's SETTINGS_MAX_CONCURRENT_STREAMS) and writes the request's HEADERS, and when the
//     caller has the whole body, its DATA and END_STREAM, into the connection's buffer in one step.
//   - A flusher goroutine per connection, woken once per batch, writes the buffer to the socket
//     after the writers that are ready have run, so a request's HEADERS and DATA, and the frames
//     of streams that are ready together, leave in one write, as grpc-go's loopy writer batches
//     them (conn.write says why the caller does not flush a lone stream itself).
//   - Only a body still arriving (a client stream) gets a goroutine of its own (Stream.SendBody).
//   - The connection's read loop decodes the response into the stream and wakes its caller once
//     per batch of frames; the caller copies the body out (Next, Consumed) and returns flow-control
//     credit in batches (a WINDOW_UPDATE per quarter window).
//   - Stream.Finish resets a stream that is not complete both ways (the client went away, a
//     deadline passed) and gives its slot back.
//
// A connection going away (GOAWAY) takes no new streams and closes once its last one is done; a
// connection idle for the pool's idle timeout, or asked to by CloseIdle, is closed. A pool left
// without connections is forgotten, so endpoints that come and go do not pile up.
package h2client

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

const (
	streamWindow = 1 << 20 // receive window per stream: what one slow client can make us buffer
	connWindow   = 1 << 30 // receive window of a connection (streams bound it first)
	maxStreams   = 1000    // streams per connection when the peer sets no limit
	// DefaultMaxHeaderList is the largest response header block accepted unless NewPools is
	// given another.
	DefaultMaxHeaderList = 1 << 20
	dialTimeout          = 30 * time.Second
)

// Errors a stream fails with; a net.Error or an http2.StreamError are the others.
var (
	ErrClosed   = errors.New("h2c: upstream connection closed")
	ErrGoAway   = errors.New("h2c: upstream connection going away")
	ErrProtocol = errors.New("h2c: upstream protocol error")
	ErrCanceled = errors.New("h2c: request canceled")
)

// DialFunc connects to an endpoint (plain TCP, or TLS for clusters that want it).
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Pools holds one Pool per key (an endpoint address and whatever else makes connections
// different, such as their timeouts and TLS), shared by every forwarder of the proxy, so that a
// new routing table keeps the connections of the old one.
type Pools[K comparable] struct {
	mu            sync.Mutex
	m             map[K]*Pool
	maxHeaderList uint32
}

// NewPools returns empty pools whose connections accept response header lists up to
// maxHeaderList bytes (0: DefaultMaxHeaderList).
func NewPools[K comparable](maxHeaderList uint32) *Pools[K] {
	if maxHeaderList == 0 {
		maxHeaderList = DefaultMaxHeaderList
	}
	return &Pools[K]{m: map[K]*Pool{}, maxHeaderList: maxHeaderList}
}

// Pool returns the pool of key, made on first use with addr, dial and idle (0: connections are
// never closed for being idle).
func (ps *Pools[K]) Pool(key K, addr string, dial DialFunc, idle time.Duration) *Pool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p := ps.m[key]
	if p == nil {
		p = &Pool{addr: addr, dial: dial, idle: idle, maxHeaderList: ps.maxHeaderList}
		p.forget = func() { ps.forget(key, p) }
		ps.m[key] = p
	}
	return p
}

// forget drops p if it is still the pool of key.
func (ps *Pools[K]) forget(key K, p *Pool) {
	ps.mu.Lock()
	if ps.m[key] == p {
		delete(ps.m, key)
	}
	ps.mu.Unlock()
}

// Len is the number of pools held.
func (ps *Pools[K]) Len() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.m)
}

// CloseIdle closes every connection that carries no stream.
func (ps *Pools[K]) CloseIdle() {
	ps.mu.Lock()
	pools := make([]*Pool, 0, len(ps.m))
	for _, p := range ps.m {
		pools = append(pools, p)
	}
	ps.mu.Unlock()
	for _, p := range pools {
		p.CloseIdle()
	}
}

// Pool is the connections to one endpoint: dialed within the dial function's own bounds,
// closed after the idle timeout without a stream.
type Pool struct {
	addr          string
	dial          DialFunc
	idle          time.Duration
	maxHeaderList uint32
	forget        func() // drops the pool from its Pools

	mu      sync.Mutex
	conns   []*conn
	dialing *dialing // the dial in progress, which waiters share
}

type dialing struct {
	done chan struct{}
	c    *conn
	err  error
}

// Open starts a request on a connection of the pool: header adds its fields (pseudo-header
// fields first). With end set, body is the whole request body: it goes with the header, and
// END_STREAM after it, in the same step when the peer's flow-control windows allow (else the
// rest follows from a goroutine; body is not kept past Open). Without end the body is to come
// through SendBody, and body must be empty. A connection found going away is given up for another
// once. The caller must call Finish on the stream.
func (p *Pool) Open(ctx context.Context, header func(add func(name, value string)), body []byte, end bool) (*Stream, error) {
	var err error
	for range 2 {
		var c *conn
		if c, err = p.get(ctx); err != nil {
			return nil, err
		}
		var s *Stream
		if s, err = c.open(header, body, end); err == nil {
			return s, nil
		}
		c.release()
		if !errors.Is(err, ErrGoAway) {
			break
		}
	}
	return nil, err
}

// get returns a connection with a stream slot reserved for the caller (given back by release):
// the least busy connection with room, else a new one.
func (p *Pool) get(ctx context.Context) (*conn, error) {
	for {
		p.mu.Lock()
		var best *conn
		for _, c := range p.conns {
			if c.usable() && (best == nil || c.active < best.active) {
				best = c
			}
		}
		if best != nil {
			best.active++
			best.used = true
			p.mu.Unlock()
			return best, nil
		}
		d := p.dialing
		if d == nil {
			d = &dialing{done: make(chan struct{})}
			p.dialing = d
			go p.dialNew(d)
		}
		p.mu.Unlock()
		select {
		case <-d.done:
			if d.err != nil {
				return nil, d.err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// dialNew dials, under the dial timeout only (not a request's context: the connection outlives
// the request that asked for it), and adds the connection to the pool.
func (p *Pool) dialNew(d *dialing) {
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	nc, err := p.dial(ctx, "tcp", p.addr)
	if err == nil {
		d.c, err = newConn(p, nc)
		if err != nil {
			_ = nc.Close()
		}
	}
	d.err = err
	p.mu.Lock()
	if err == nil {
		p.conns = append(p.conns, d.c)
	}
	p.dialing = nil
	p.mu.Unlock()
	close(d.done)
}

// remove drops a closed connection. A pool left with none is forgotten by its Pools; a
// forwarder still holding it can keep using it, and the next table's forwarders start afresh.
func (p *Pool) remove(c *conn) {
	p.mu.Lock()
	for i, x := range p.conns {
		if x == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	empty := len(p.conns) == 0 && p.dialing == nil
	p.mu.Unlock()
	if empty && p.forget != nil {
		p.forget()
	}
}

// CloseIdle closes the pool's connections that carry no stream.
func (p *Pool) CloseIdle() {
	p.mu.Lock()
	var idle []*conn
	for _, c := range p.conns {
		if c.active == 0 {
			idle = append(idle, c)
		}
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.close(ErrClosed)
	}
}
