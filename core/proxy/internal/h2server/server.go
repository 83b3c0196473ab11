// Package h2server is the proxy's own inbound HTTP/2 server, built on golang.org/x/net/http2's
// Framer and HPACK (as the engine's h2c client is). It serves connections the HTTP/1.1 server
// hands over (TLS with ALPN "h2", and cleartext connections that open with the HTTP/2 preface)
// through the same http.Handler the HTTP/1.1 server calls.
//
// Why not net/http's server: it runs every frame through one serve goroutine, a write
// scheduler and a goroutine per frame write, which made inbound HTTP/2 cost about twice nginx's
// CPU per request (docs/performance.md). Here the connection's goroutine reads and dispatches
// frames, each stream's handler (on a reused goroutine, workers.go) encodes and writes its own
// frames under the connection's write lock, and a response's HEADERS and DATA leave in one
// write.
//
// Defences, each bounded and tested: a reset stream keeps its concurrency slot until its
// handler returns (rapid reset, CVE-2023-44487, cannot pile up work), a budget of client resets
// and refused streams, header blocks capped in size and CONTINUATION frames (CVE-2024-27316,
// HPACK bombs), a rate limit on control frames (SETTINGS, PING, PRIORITY, empty DATA; PINGs in
// proportion to the traffic, as grpc-go's BDP pings come, are not counted), and a stall timeout
// on flow-control credit and socket writes (zero-window stalls).
package h2server

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Config is a Server's settings. Zero values take the defaults named on each field.
type Config struct {
	// Handler serves every request.
	Handler http.Handler
	// MaxConcurrentStreams caps the streams of one connection (SETTINGS_MAX_CONCURRENT_STREAMS). A
	// stream counts while open or half-closed, and a reset one until its handler has returned,
	// not only until the protocol closes it. Default 250.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize caps a request's decoded header list (RFC 9113 §6.5.2 accounting); a larger
	// one is answered 431. Default 64 KiB.
	MaxHeaderListSize uint32
	// PrefaceTimeout bounds the wait for the client preface and its first SETTINGS. Default 10s.
	PrefaceTimeout time.Duration
	// IdleTimeout closes (GOAWAY, then close) a connection without streams this long (up to twice
	// as long: the timer checks for activity, not for its time). 0: none.
	IdleTimeout time.Duration
	// StallTimeout bounds how long a stream waits for flow-control credit, and how long one socket
	// write may block, before the stream is reset or the connection closed. Default 30s.
	StallTimeout time.Duration
	// ConnContext derives a connection's base context (client address for balancers, the
	// http.ServerContextKey the handlers look for).
	ConnContext func(ctx context.Context, nc net.Conn) context.Context
	// Log receives protocol errors at debug and handler panics at error.
	Log *zap.Logger

	// testHookHandlerDone (tests only) runs when a stream's handler has returned and its
	// response is complete or reset, before the stream's last bookkeeping.
	testHookHandlerDone func(id uint32)
}

const (
	defaultMaxStreams  = 250
	defaultHeaderList  = 64 << 10
	defaultPreface     = 10 * time.Second
	defaultStall       = 30 * time.Second
	streamWindow       = 1 << 20 // what each stream may send before the handler reads
	connWindow         = 1 << 20 // what the connection may send before handlers read
	maxReadFrameSize   = 16 << 10
	responseBufferSize = 16 << 10
)

// Server serves HTTP/2 connections handed to ServeConn.
type Server struct {
	cfg     Config
	closing atomic.Bool
	mu      sync.Mutex
	conns   map[*conn]struct{}
	done    chan struct{} // closed when the last connection ends after closing
	served  atomic.Int64
	workers *workers // run the streams' handlers (workers.go)
}

// New returns a server with cfg's defaults filled in.
func New(cfg Config) *Server {
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = defaultMaxStreams
	}
	if cfg.MaxHeaderListSize == 0 {
		cfg.MaxHeaderListSize = defaultHeaderList
	}
	if cfg.PrefaceTimeout <= 0 {
		cfg.PrefaceTimeout = defaultPreface
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = defaultStall
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Server{cfg: cfg, conns: map[*conn]struct{}{}, workers: newWorkers()}
}

// ServeConn serves one connection until it ends. r reads what the caller already buffered
// from nc (the preface of a cleartext connection), then nc; nil reads nc.
func (s *Server) ServeConn(nc net.Conn, r io.Reader) {
	c := newConn(s, nc, r)
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.served.Add(1)
	defer s.untrack(c)
	c.serve()
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if len(s.conns) == 0 && s.done != nil {
		close(s.done)
		s.done = nil
	}
	s.mu.Unlock()
}

// Active is the number of connections being served.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Shutdown sends every connection a GOAWAY, lets their streams finish, and waits for the
// connections to close until ctx is done. New connections are refused.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	if len(s.conns) == 0 {
		s.mu.Unlock()
		return nil
	}
	done := s.done
	if done == nil {
		done = make(chan struct{})
		s.done = done
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.drain()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes every connection now.
func (s *Server) Close() error {
	s.closing.Store(true)
	s.mu.Lock()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	s.mu.Unlock()
	return nil
}
