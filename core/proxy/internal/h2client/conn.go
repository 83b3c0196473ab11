package h2client

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// conn is one upstream connection. Its read loop (read.go) owns the framer's reading side;
// frames are written under wmu by whichever goroutine has something to say (see write). mu
// guards the stream table and the flow-control state and is never held while waiting for wmu.
type conn struct {
	pool *Pool
	nc   net.Conn
	fr   *http2.Framer // reads belong to readLoop; writes are under wmu

	// Writing, under wmu.
	wmu       sync.Mutex
	bw        *bufio.Writer
	henc      *hpack.Encoder
	hbuf      bytes.Buffer
	flushOwed bool  // the flusher has been woken and has not flushed yet
	flusher   bool  // the flusher goroutine runs
	werr      error // the first write error; every later write fails with it
	// opened counts the streams between open and Finish: with none, a write is flushed at once.
	opened atomic.Int32
	flushc chan struct{} // wakes flushLoop
	closed chan struct{} // closed with the connection

	// Stream slots reserved through the pool, and whether one was taken since the idle timer
	// last looked: under pool.mu.
	active int
	used   bool

	mu         sync.Mutex
	streams    map[uint32]*Stream
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

func newConn(p *Pool, nc net.Conn) (*conn, error) {
	c := &conn{pool: p, nc: nc, bw: bufio.NewWriterSize(nc, 32<<10), streams: map[uint32]*Stream{},
		nextID: 1, maxStreams: maxStreams, sendWindow: 65535, initWindow: 65535, maxFrame: 16384,
		flushc: make(chan struct{}, 1), closed: make(chan struct{})}
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 32<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = p.maxHeaderList
	c.fr.SetReuseFrames()
	c.henc = hpack.NewEncoder(&c.hbuf)
	_, err := c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: p.maxHeaderList})
	}
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, connWindow-65535)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("h2c preface: %w", err)
	}
	if p.idle > 0 {
		c.idleTimer = time.AfterFunc(p.idle, c.onIdle)
	}
	go c.readLoop()
	return c, nil
}

// usable reports whether a new stream may go on c (pool.mu held).
func (c *conn) usable() bool {
	c.mu.Lock()
	ok := c.err == nil && !c.goaway && uint32(c.active) < c.maxStreams && c.nextID < 1<<31-2
	c.mu.Unlock()
	return ok
}

// release gives back the stream slot get reserved; a connection going away closes with its
// last stream.
func (c *conn) release() {
	p := c.pool
	p.mu.Lock()
	c.active--
	// A stream's end is a use too: else a stream open across the idle timer's look, ending
	// just after it, would leave its connection closed less than an idle timeout later.
	c.used = true
	idle := c.active == 0
	p.mu.Unlock()
	if !idle {
		return
	}
	c.mu.Lock()
	drained := c.goaway && c.err == nil
	c.mu.Unlock()
	if drained {
		c.close(ErrGoAway)
	}
}

// onIdle closes the connection if no stream was open, taken or ended since the timer's last
// look, else looks again an idle timeout later. Streams only set a flag (no timer reset per
// stream), so an idle connection closes between one and two idle timeouts after its last stream
// ended.
func (c *conn) onIdle() {
	p := c.pool
	p.mu.Lock()
	idle := c.active == 0 && !c.used
	c.used = false
	p.mu.Unlock()
	if idle {
		c.close(ErrClosed)
		return
	}
	c.idleTimer.Reset(p.idle)
}

// close ends the connection: every stream fails with err, the pool forgets it.
func (c *conn) close(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	streams := c.streams
	c.streams = map[uint32]*Stream{}
	c.mu.Unlock()
	c.pool.remove(c) // first: whoever sees closed finds the pool without c
	close(c.closed)
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	_ = c.nc.Close()
	for _, s := range streams {
		s.fail(err)
	}
}

// write runs f (which writes frames into the buffer) under the write lock and leaves the flush
// to the connection's flusher goroutine, woken once per batch: it runs after the goroutines
// already runnable (other streams' callers, the read loop) have added their frames, so that a
// request's HEADERS and DATA, and the frames of every stream ready at the same moment, leave in
// one write. Only frames written while no stream is open (the read loop's acknowledgements on an
// idle connection) are flushed at once.
//
// Flushing in the caller while its stream is the connection's only one was tried (issue 19): it
// saves a lone call one goroutine switch on the same thread, but when the proxy is the
// bottleneck the streams of a busy connection often find themselves alone for a moment (the
// others still unread in the client's socket) and every request then cost a write of its own:
// CPU per call at 64 calls in flight on one connection rose by a third.
func (c *conn) write(f func() error) error { return c.writeFlush(f) }

// writeFlush writes with f and flushes in this goroutine when no stream is open, else wakes the
// flusher.
func (c *conn) writeFlush(f func() error) error {
	c.wmu.Lock()
	err := c.werr
	if err == nil {
		if err = f(); err != nil {
			c.werr = err
		}
	}
	if err == nil && c.opened.Load() == 0 {
		c.flushOwed = false
		if err = c.bw.Flush(); err != nil {
			c.werr = err
		}
		c.wmu.Unlock()
		if err != nil {
			c.close(err)
		}
		return err
	}
	wake := err == nil && !c.flushOwed
	if wake {
		c.flushOwed = true
		if !c.flusher {
			c.flusher = true
			go c.flushLoop()
		}
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
// It yields before flushing: the writer that woke it made it the next goroutine to run, ahead of
// the other handlers already runnable, and those must add their requests to the same write. (A
// request whose body went with its header no longer starts a body goroutine that used to push
// the flusher back; without the yield each request had a write of its own, 1.35-1.40x the CPU
// per call at 64 in flight in bench/results/20261206T115114Z.json.)
func (c *conn) flushLoop() {
	for {
		select {
		case <-c.flushc:
		case <-c.closed:
			return
		}
		runtime.Gosched()
		c.wmu.Lock()
		err := c.werr
		if err == nil && c.flushOwed {
			if err = c.bw.Flush(); err != nil {
				c.werr = err
			}
		}
		c.flushOwed = false
		c.wmu.Unlock()
		if err != nil {
			c.close(err)
			return
		}
	}
}
