package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The engine's own cleartext HTTP/2 client (prior knowledge) for h2c clusters (Service
// appProtocol kubernetes.io/h2c, gRPC). It replaces http.Transport's HTTP/2 client on that path
// because that one writes and flushes every frame on its own (request HEADERS, each DATA frame, the
// closing DATA frame) from a goroutine per request: under gRPC load that was a third of the
// proxy's CPU in write system calls and goroutine handoffs. Here every frame is written into the
// connection's buffer under one mutex and a flusher goroutine writes them out once per batch, so
// frames of the streams that are ready together (and a request's HEADERS with its DATA frames)
// leave in one write, as grpc-go's own loopy writer batches them.
//
// One connection per endpoint carries every stream until the endpoint's
// SETTINGS_MAX_CONCURRENT_STREAMS is reached; then another is opened. Connections idle for the
// idle timeout, or asked to by closeIdle, are closed.

const (
	h2cStreamWindow = 1 << 20 // receive window per stream: what one slow client can make us buffer
	h2cConnWindow   = 1 << 30 // receive window of a connection (streams bound it first)
	h2cMaxStreams   = 1000    // streams per connection when the peer sets no limit
	h2cMaxHeader    = 1 << 20 // largest response header block accepted
)

var (
	errH2CClosed   = errors.New("h2c: upstream connection closed")
	errH2CGoAway   = errors.New("h2c: upstream connection going away")
	errH2CProtocol = errors.New("h2c: upstream protocol error")
)

// h2cPools holds one pool per endpoint address and connection policy (connpolicy.go), shared by
// every forwarder of the proxy, so a new table keeps the connections of the old one.
type h2cPools struct {
	mu    sync.Mutex
	m     map[poolKey]*h2cPool
	hdrSz uint32
}

func newH2CPools() *h2cPools {
	return &h2cPools{m: map[poolKey]*h2cPool{}, hdrSz: h2cMaxHeader}
}

func (ps *h2cPools) pool(addr string, pol connPolicy) *h2cPool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	k := poolKey{addr: addr, pol: pol}
	p := ps.m[k]
	if p == nil {
		p = &h2cPool{addr: addr, pol: pol, dialer: pol.dial, ps: ps}
		ps.m[k] = p
	}
	return p
}

// forget drops p from the pools if it is still the one for its address and policy.
func (ps *h2cPools) forget(p *h2cPool) {
	k := poolKey{addr: p.addr, pol: p.pol}
	ps.mu.Lock()
	if ps.m[k] == p {
		delete(ps.m, k)
	}
	ps.mu.Unlock()
}

// size is the number of endpoint pools held (tests).
func (ps *h2cPools) size() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.m)
}

// closeIdle closes every connection that carries no stream.
func (ps *h2cPools) closeIdle() {
	ps.mu.Lock()
	pools := make([]*h2cPool, 0, len(ps.m))
	for _, p := range ps.m {
		pools = append(pools, p)
	}
	ps.mu.Unlock()
	for _, p := range pools {
		p.closeIdle()
	}
}

// h2cPool is the connections to one endpoint under one policy: dialed within its connect timeout,
// closed after its idle timeout without a stream.
type h2cPool struct {
	addr   string
	pol    connPolicy
	dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	ps     *h2cPools
	mu     sync.Mutex
	conns  []*h2cConn
	dial   *h2cDial // the dial in progress, which waiters share
}

type h2cDial struct {
	done chan struct{}
	c    *h2cConn
	err  error
}

// get returns a connection with a stream slot reserved for the caller (release it with
// conn.release): the least busy connection with room, else a new one.
func (p *h2cPool) get(ctx context.Context) (*h2cConn, error) {
	for {
		p.mu.Lock()
		var best *h2cConn
		for _, c := range p.conns {
			if c.usable() && (best == nil || c.active < best.active) {
				best = c
			}
		}
		if best != nil {
			best.active++
			p.mu.Unlock()
			return best, nil
		}
		d := p.dial
		if d == nil {
			d = &h2cDial{done: make(chan struct{})}
			p.dial = d
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
func (p *h2cPool) dialNew(d *h2cDial) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := p.dialer(ctx, "tcp", p.addr)
	if err == nil {
		d.c, err = newH2CConn(p, nc)
		if err != nil {
			_ = nc.Close()
		}
	}
	d.err = err
	p.mu.Lock()
	if err == nil {
		p.conns = append(p.conns, d.c)
	}
	p.dial = nil
	p.mu.Unlock()
	close(d.done)
}

// remove drops a closed connection. A pool left with none is forgotten by the proxy's pools, so
// endpoints that come and go (pods rescheduled) do not pile up; a forwarder still holding it can
// keep using it, and the next table's forwarders start a fresh one.
func (p *h2cPool) remove(c *h2cConn) {
	p.mu.Lock()
	for i, x := range p.conns {
		if x == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			break
		}
	}
	empty := len(p.conns) == 0 && p.dial == nil
	p.mu.Unlock()
	if empty {
		p.ps.forget(p)
	}
}

func (p *h2cPool) closeIdle() {
	p.mu.Lock()
	var idle []*h2cConn
	for _, c := range p.conns {
		if c.active == 0 {
			idle = append(idle, c)
		}
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.close(errH2CClosed)
	}
}

// h2cConn is one upstream connection.
type h2cConn struct {
	pool *h2cPool
	nc   net.Conn
	fr   *http2.Framer // reads belong to readLoop; writes are under wmu

	// Writing.
	wmu       sync.Mutex
	bw        *bufio.Writer
	henc      *hpack.Encoder
	hbuf      bytes.Buffer
	flushOwed bool          // the flusher has been woken and has not flushed yet
	werr      error         // the first write error; every later write fails with it
	flushc    chan struct{} // wakes flushLoop
	closed    chan struct{} // closed with the connection

	// Stream state, under mu. active (streams reserved through the pool) is under pool.mu.
	active     int
	mu         sync.Mutex
	streams    map[uint32]*h2cStream
	nextID     uint32
	maxStreams uint32
	sendWindow int32 // connection-level send window
	initWindow int32 // the peer's initial stream window
	maxFrame   uint32
	goaway     bool
	err        error // set once the connection is done
	recvUnack  int32 // connection-level bytes consumed but not yet returned by WINDOW_UPDATE
	idleTimer  *time.Timer
}

func newH2CConn(p *h2cPool, nc net.Conn) (*h2cConn, error) {
	c := &h2cConn{pool: p, nc: nc, bw: bufio.NewWriterSize(nc, 32<<10), streams: map[uint32]*h2cStream{},
		nextID: 1, maxStreams: h2cMaxStreams, sendWindow: 65535, initWindow: 65535, maxFrame: 16384,
		flushc: make(chan struct{}, 1), closed: make(chan struct{})}
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 32<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = p.ps.hdrSz
	c.fr.SetReuseFrames()
	c.henc = hpack.NewEncoder(&c.hbuf)
	_, err := c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2cStreamWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: p.ps.hdrSz})
	}
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, h2cConnWindow-65535)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("h2c preface: %w", err)
	}
	if p.pol.idle > 0 {
		c.idleTimer = time.AfterFunc(p.pol.idle, c.closeIfIdle)
	}
	go c.readLoop()
	go c.flushLoop()
	return c, nil
}

// usable reports whether a new stream may go on c (pool.mu held).
func (c *h2cConn) usable() bool {
	c.mu.Lock()
	ok := c.err == nil && !c.goaway && uint32(c.active) < c.maxStreams && c.nextID < 1<<31-2
	c.mu.Unlock()
	return ok
}

// release gives back the stream slot get reserved.
func (c *h2cConn) release() {
	p := c.pool
	p.mu.Lock()
	c.active--
	idle := c.active == 0
	p.mu.Unlock()
	if !idle {
		return
	}
	c.mu.Lock()
	drained := c.goaway && c.err == nil
	c.mu.Unlock()
	switch {
	case drained:
		c.close(errH2CGoAway)
	case c.idleTimer != nil:
		c.idleTimer.Reset(p.pol.idle)
	}
}

func (c *h2cConn) closeIfIdle() {
	p := c.pool
	p.mu.Lock()
	idle := c.active == 0
	p.mu.Unlock()
	if idle {
		c.close(errH2CClosed)
	} else if c.idleTimer != nil {
		c.idleTimer.Reset(p.pol.idle)
	}
}

// close ends the connection: every stream fails with err, the pool forgets it.
func (c *h2cConn) close(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	streams := c.streams
	c.streams = map[uint32]*h2cStream{}
	c.mu.Unlock()
	close(c.closed)
	c.pool.remove(c)
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	_ = c.nc.Close()
	for _, s := range streams {
		s.fail(err)
	}
}

// write runs f (which writes frames into the buffer) under the write lock and leaves the flush
// to the connection's flusher goroutine, woken once per batch: it runs only after the goroutines
// already runnable (other streams' handlers, the readLoop, the request-body senders this very
// request woke), so their frames join the same write. A unary gRPC call's HEADERS, DATA and
// END_STREAM leave in one system call instead of three.
func (c *h2cConn) write(f func() error) error {
	c.wmu.Lock()
	err := c.werr
	if err == nil {
		if err = f(); err != nil {
			c.werr = err
		}
	}
	wake := err == nil && !c.flushOwed
	if wake {
		c.flushOwed = true
	}
	c.wmu.Unlock()
	if err != nil {
		c.close(err)
		return err
	}
	if wake {
		select {
		case c.flushc <- struct{}{}:
		default:
		}
	}
	return nil
}

// flushLoop writes out what the writers buffered, once per wake-up, until the connection closes.
func (c *h2cConn) flushLoop() {
	for {
		select {
		case <-c.flushc:
		case <-c.closed:
			return
		}
		c.wmu.Lock()
		c.flushOwed = false
		err := c.werr
		if err == nil {
			if err = c.bw.Flush(); err != nil {
				c.werr = err
			}
		}
		c.wmu.Unlock()
		if err != nil {
			c.close(err)
			return
		}
	}
}

// readLoop reads and dispatches the connection's frames until it fails.
func (c *h2cConn) readLoop() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.resetStream(se.StreamID, se.Code, fmt.Errorf("%w: %v", errH2CProtocol, se))
				continue
			}
			if errors.Is(err, io.EOF) {
				err = errH2CClosed
			}
			c.close(err)
			return
		}
		if err := c.dispatch(f); err != nil {
			_ = c.write(func() error { return c.fr.WriteGoAway(0, http2.ErrCodeProtocol, nil) })
			c.close(err)
			return
		}
	}
}

func (c *h2cConn) dispatch(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if s := c.stream(f.StreamID); s != nil {
			s.onHeaders(f)
		}
	case *http2.DataFrame:
		c.onData(f)
	case *http2.RSTStreamFrame:
		if s := c.stream(f.StreamID); s != nil {
			c.forget(s)
			s.fail(http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
		}
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			_ = c.write(func() error { return c.fr.WritePing(true, data) })
		}
	case *http2.GoAwayFrame:
		c.onGoAway(f)
	case *http2.WindowUpdateFrame:
		c.onWindowUpdate(f)
	case *http2.PushPromiseFrame:
		return fmt.Errorf("%w: PUSH_PROMISE though push is disabled", errH2CProtocol)
	}
	return nil
}

func (c *h2cConn) stream(id uint32) *h2cStream {
	c.mu.Lock()
	s := c.streams[id]
	c.mu.Unlock()
	return s
}

// forget removes s from the stream table (the peer reset it, or it is complete).
func (c *h2cConn) forget(s *h2cStream) {
	c.mu.Lock()
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
	}
	c.mu.Unlock()
}

// onData queues a DATA frame's payload on its stream. Bytes for a stream we no longer track are
// credited back to the connection window at once.
func (c *h2cConn) onData(f *http2.DataFrame) {
	n := int32(f.Header().Length)
	s := c.stream(f.StreamID)
	if s == nil || !s.onData(f.Data(), n, f.StreamEnded()) {
		c.credit(n)
	}
}

// credit returns n consumed bytes to the connection's receive window, by WINDOW_UPDATE once a
// good share of it has been used.
func (c *h2cConn) credit(n int32) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.recvUnack += n
	send := c.recvUnack
	if send < h2cConnWindow/4 {
		c.mu.Unlock()
		return
	}
	c.recvUnack = 0
	c.mu.Unlock()
	_ = c.write(func() error { return c.fr.WriteWindowUpdate(0, uint32(send)) })
}

func (c *h2cConn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	var tableSize uint32
	var haveTable bool
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		switch st.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = min(st.Val, h2cMaxStreams)
		case http2.SettingInitialWindowSize:
			delta := int32(st.Val) - c.initWindow
			c.initWindow = int32(st.Val)
			for _, s := range c.streams {
				s.sendWindow += delta
				s.wakeSender()
			}
		case http2.SettingMaxFrameSize:
			c.maxFrame = st.Val
		case http2.SettingHeaderTableSize:
			tableSize, haveTable = st.Val, true
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.write(func() error {
		if haveTable {
			c.henc.SetMaxDynamicTableSizeLimit(tableSize)
		}
		return c.fr.WriteSettingsAck()
	})
}

// onGoAway stops new streams on c; streams the peer will not process fail now, the others finish.
func (c *h2cConn) onGoAway(f *http2.GoAwayFrame) {
	c.mu.Lock()
	c.goaway = true
	var gone []*h2cStream
	for id, s := range c.streams {
		if id > f.LastStreamID {
			gone = append(gone, s)
			delete(c.streams, id)
		}
	}
	c.mu.Unlock()
	for _, s := range gone {
		s.fail(errH2CGoAway)
	}
}

func (c *h2cConn) onWindowUpdate(f *http2.WindowUpdateFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWindow += int32(f.Increment)
		for _, s := range c.streams {
			s.wakeSender()
		}
		return
	}
	if s := c.streams[f.StreamID]; s != nil {
		s.sendWindow += int32(f.Increment)
		s.wakeSender()
	}
}

// resetStream sends RST_STREAM for id and fails the stream locally with err.
func (c *h2cConn) resetStream(id uint32, code http2.ErrCode, err error) {
	s := c.stream(id)
	if s != nil {
		c.forget(s)
		s.fail(err)
	}
	_ = c.write(func() error {
		if s != nil {
			s.wclosed.Store(true)
		}
		return c.fr.WriteRSTStream(id, code)
	})
}
