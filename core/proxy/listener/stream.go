package listener

import (
	"context"
	"net"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// streamServer is the proxy.ConnServer of the layer-4 stream listeners (listener.tcp,
// listener.tls): one goroutine per connection, holding a reference on the socket's current table
// for the connection's whole life, and tracked so that Shutdown can wait for connections and
// Close can cut them.
type streamServer struct {
	sc proxy.ServeContext
	// handle serves one accepted connection with the table state it was accepted under; it owns c.
	handle func(ctx context.Context, c net.Conn, ls *proxy.ListenerState)

	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup

	accepted, dropped atomic.Int64
}

var (
	_ proxy.ConnServer    = (*streamServer)(nil)
	_ proxy.StatsReporter = (*streamServer)(nil)
)

func newStreamServer(sc proxy.ServeContext, handle func(context.Context, net.Conn, *proxy.ListenerState)) *streamServer {
	ctx, cancel := context.WithCancel(context.Background())
	return &streamServer{sc: sc, handle: handle, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
}

// Serve implements proxy.ConnServer.
func (s *streamServer) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return net.ErrClosed
	}
	s.ln = l
	s.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		if !s.track(c) {
			_ = c.Close()
			return net.ErrClosed
		}
		s.accepted.Add(1)
		go s.serve(c)
	}
}

func (s *streamServer) serve(c net.Conn) {
	defer s.untrack(c)
	ls := s.sc.Acquire()
	if ls == nil {
		_ = c.Close()
		return
	}
	defer ls.Release()
	s.handle(s.ctx, c, ls)
}

func (s *streamServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *streamServer) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// stop stops accepting; it reports whether it was the first call.
func (s *streamServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		if s.ln != nil {
			_ = s.ln.Close()
		}
	}
}

// Shutdown implements proxy.ConnServer: stop accepting, then wait for the connections to end.
func (s *streamServer) Shutdown(ctx context.Context) error {
	s.stop()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements proxy.ConnServer: stop accepting and close every connection now.
func (s *streamServer) Close() error {
	s.stop()
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	return nil
}

// Stats implements proxy.StatsReporter.
func (s *streamServer) Stats() map[string]int64 {
	s.mu.Lock()
	active := int64(len(s.conns))
	s.mu.Unlock()
	return map[string]int64{
		"stream_connections_active":   active,
		"stream_connections_accepted": s.accepted.Load(),
		"stream_connections_dropped":  s.dropped.Load(),
	}
}

// drop closes a connection the listener could not route (no route, no ClientHello, a failed
// handshake), counting it and logging at debug: scanners and misdirected clients are not the
// operator's problem.
func (s *streamServer) drop(c net.Conn, why string, err error) {
	s.dropped.Add(1)
	dropped(s.sc.Log, c, why, err)
}

// dropped logs a connection closed without being served, at debug.
func dropped(log *zap.Logger, c net.Conn, why string, err error) {
	if ce := log.Check(zap.DebugLevel, "connection dropped"); ce != nil {
		ce.Write(zap.Stringer("client", c.RemoteAddr()), zap.String("reason", why), zap.Error(err))
	}
	_ = c.Close()
}
