package tcproute

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/core"
)

// spliceChunk bounds one zero-copy transfer, so that a busy stream still reports progress to the
// idle watchdog between chunks (the kernel moves at most this much per ReadFrom call).
const spliceChunk = 4 << 20

// bufPool holds the buffers of the copy loops that cannot splice (a TLS-terminated side).
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// Stats counts the bytes a Pipe moved.
type Stats struct {
	// Up is what the downstream sent to the upstream (the prefix included), Down the reverse.
	Up, Down int64
	// Idle reports that the pipe was cut by the idle timeout.
	Idle bool
}

// Pipe copies bytes between down and up in both directions until both directions have ended,
// then closes both connections. prefix is sent upstream first (bytes already read from down).
//
// When one side ends its stream (EOF) the other is half-closed (CloseWrite), so a client that
// shuts down its sending side still receives the whole response. An error in either direction
// (a reset, a write to a closed peer) closes both connections at once.
//
// Between two *net.TCPConn (TCP routes and TLS passthrough) each direction uses
// net.TCPConn.ReadFrom, which on Linux moves the bytes with splice(2) through a kernel pipe and
// never copies them into user space. A TLS-terminated side is copied through a pooled buffer.
//
// With idle > 0 the pipe is closed once no byte has moved in either direction for idle (measured
// with a resolution of idle/4). Each direction wakes up every idle/4 by a read deadline to report
// progress made in the middle of a transfer; a watchdog decides (on Linux confirming with the
// kernel's last-data times, see watch), so a direction blocked writing to
// a peer that stopped reading is cut too.
func Pipe(down, up net.Conn, prefix []byte, idle time.Duration) Stats {
	p := &pipe{down: down, up: up}
	var st Stats
	if len(prefix) > 0 {
		n, err := up.Write(prefix)
		st.Up += int64(n)
		if err != nil {
			p.closeBoth()
			return st
		}
	}
	var period time.Duration
	if idle > 0 {
		period = max(idle/4, time.Millisecond)
		p.touch()
		t := time.AfterFunc(time.Duration(1<<62), func() { p.watch(idle, period) })
		p.watchdog.Store(t)
		t.Reset(period)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		st.Up += p.direction(up, down, period)
	}()
	st.Down = p.direction(down, up, period)
	wg.Wait()
	if t := p.watchdog.Load(); t != nil {
		t.Stop()
	}
	p.closeBoth()
	st.Idle = p.idle.Load()
	return st
}

type pipe struct {
	down, up net.Conn
	last     atomic.Int64 // unix nanoseconds of the last observed progress
	idle     atomic.Bool
	closed   sync.Once
	watchdog atomic.Pointer[time.Timer]
	done     atomic.Int32 // directions finished
}

func (p *pipe) touch() { p.last.Store(time.Now().UnixNano()) }

// watch closes both sides when nothing moved for idle, and re-arms itself otherwise.
//
// The copy loops report progress only when they run: on a starved machine (a loaded -race run, an
// overloaded proxy) a loop can sit on bytes it moved, or on bytes waiting in its socket, for longer
// than the timeout while this timer runs. So before cutting, the kernel is asked when the sockets
// last carried data, and data it saw within idle counts as the progress the loops had not reported.
func (p *pipe) watch(idle, period time.Duration) {
	if p.done.Load() == 2 {
		return
	}
	if last := p.last.Load(); time.Since(time.Unix(0, last)) >= idle {
		since, ok := sinceLastData(p.down, p.up)
		if !ok || since >= idle {
			p.idle.Store(true)
			p.closeBoth()
			return
		}
		p.last.CompareAndSwap(last, time.Now().Add(-since).UnixNano()) // unless a loop reported since
	}
	p.watchdog.Load().Reset(period)
}

func (p *pipe) closeBoth() {
	p.closed.Do(func() {
		_ = p.down.Close()
		_ = p.up.Close()
	})
}

// direction copies src to dst until src ends, then half-closes dst. On an error it closes both
// connections so that the other direction ends too.
func (p *pipe) direction(dst, src net.Conn, period time.Duration) int64 {
	defer p.done.Add(1)
	n, err := p.copy(dst, src, period)
	if err != nil {
		p.closeBoth()
		return n
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return n
		}
	}
	// dst cannot half-close: nothing more can be said to it, so end both.
	p.closeBoth()
	return n
}

// copy moves src to dst until EOF (nil error) or a failure.
func (p *pipe) copy(dst, src net.Conn, period time.Duration) (int64, error) {
	dstTCP, dstOK := core.TCPConnOf(dst)
	srcTCP, srcOK := core.TCPConnOf(src)
	if dstOK && srcOK {
		return p.splice(dstTCP, srcTCP, period)
	}
	return p.buffered(dst, src, period)
}

// splice moves src to dst with TCPConn.ReadFrom, which splices on Linux. Without an idle timeout it
// is one call until EOF; with one, it runs in chunks under a read deadline.
func (p *pipe) splice(dst *net.TCPConn, src net.Conn, period time.Duration) (int64, error) {
	if period == 0 {
		return dst.ReadFrom(src)
	}
	var total int64
	lr := &io.LimitedReader{R: src}
	for {
		_ = src.SetReadDeadline(time.Now().Add(period))
		lr.N = spliceChunk
		n, err := dst.ReadFrom(lr)
		total += n
		if n > 0 {
			p.touch()
		}
		switch {
		case err == nil && lr.N > 0:
			return total, nil // src ended before the chunk did: EOF
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			// The deadline only wakes us to report progress; the watchdog decides about idleness.
		default:
			return total, err
		}
	}
}

// buffered copies through a pooled buffer, for a side that is not a plain TCP connection.
func (p *pipe) buffered(dst, src net.Conn, period time.Duration) (int64, error) {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	var total int64
	for {
		if period > 0 {
			_ = src.SetReadDeadline(time.Now().Add(period))
		}
		nr, rerr := src.Read(buf)
		if nr > 0 {
			p.touch()
			nw, werr := dst.Write(buf[:nr])
			total += int64(nw)
			if werr != nil {
				return total, werr
			}
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF):
			return total, nil
		case period > 0 && errors.Is(rerr, os.ErrDeadlineExceeded):
		default:
			return total, rerr
		}
	}
}
