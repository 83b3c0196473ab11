package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/core/proxy/internal/connfeed"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

// sockKey identifies a socket in the pool. The protocol is deliberately not part of it: a port whose
// protocol changes keeps its socket and switches the server behind it.
type sockKey struct {
	address string
	port    uint32
	network string
}

func (k sockKey) hostPort() string {
	return net.JoinHostPort(k.address, strconv.FormatUint(uint64(k.port), 10))
}

// socket is one bound socket. Its accept loop runs for the socket's life; accepted connections go to
// the server of the current protocol. Requests read the socket's current ListenerState per request,
// so keep-alive connections see a new table on their next request.
type socket struct {
	key    sockKey
	ln     net.Listener
	log    *zap.Logger
	limits Limits

	state atomic.Pointer[ListenerState]
	cur   atomic.Pointer[serving]

	// name and module are the IR listener name and module of the current serving; written under
	// Proxy.mu, read by Bound under it too.
	name       string
	module     core.ModuleID
	acceptDone chan struct{}

	// proxyRejected counts the connections closed for their PROXY protocol header (none, a
	// version the listener does not accept, malformed, too long, too slow).
	proxyRejected atomic.Int64
	// open counts the accepted connections not yet closed, for MaxConnectionsPerListener;
	// capRejected those closed at accept because the cap was reached, and capWarned when that
	// was last logged (Unix nanoseconds), so that a flood logs once in a while, not per connection.
	open        atomic.Int64
	capRejected atomic.Int64
	capWarned   atomic.Int64
}

// serving is one protocol server on a socket.
type serving struct {
	module core.ModuleID
	srv    ConnServer
	conns  *connfeed.Listener // what the protocol server accepts from: the accept loop feeds it
	done   chan struct{}      // closed when srv.Serve has returned
}

func bind(ctx context.Context, key sockKey) (net.Listener, error) {
	if key.network == "udp" {
		return bindPacket(ctx, key)
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, key.network, key.hostPort())
}

func newSocket(key sockKey, ln net.Listener, log *zap.Logger, limits Limits) *socket {
	return &socket{key: key, ln: ln, log: log, limits: limits, acceptDone: make(chan struct{})}
}

// serve starts a server for bl's protocol on s and makes it the one new connections go to. The
// previous server, if any, is returned for the caller to drain.
func (s *socket) serve(bl *builtListener) *serving {
	s.name, s.module = bl.ir.GetName(), bl.module
	log := s.log.With(zap.String("listener", bl.ir.GetName()))
	sv := &serving{
		module: bl.module,
		conns:  connfeed.New(s.ln.Addr()),
		done:   make(chan struct{}),
	}
	sv.srv = bl.sl.NewServer(ServeContext{
		Log:         log,
		Name:        bl.ir.GetName(),
		Limits:      s.limits,
		HTTP:        s,
		State:       s.state.Load,
		ConnContext: s.connContext,
		Acquire:     s.acquire,
		Packet:      packetConn(s.ln),
	})
	go func() {
		defer close(sv.done)
		if err := sv.srv.Serve(sv.conns); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
			log.Error("listener stopped serving", zap.Error(err))
		}
	}()
	return s.cur.Swap(sv)
}

// acceptLoop accepts until the socket is closed, backing off on errors such as running out of file
// descriptors (as net/http does) instead of spinning.
func (s *socket) acceptLoop() {
	defer close(s.acceptDone)
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", zap.String("address", s.ln.Addr().String()),
				zap.Duration("delay", delay), zap.Error(err))
			time.Sleep(delay)
			continue
		}
		delay = 0
		if c = s.admit(c); c != nil {
			s.dispatch(c)
		}
	}
}

// stop closes the socket. The connections waiting in its accept queue are handed to the current
// server first, as if the accept loop had taken them, so that they are served or closed cleanly
// by the server's shutdown instead of reset by the close (see acceptBacklog).
func (s *socket) stop() {
	for _, c := range acceptBacklog(s.ln) {
		if c = s.admit(c); c != nil {
			s.dispatch(c)
		}
	}
	_ = s.ln.Close()
}

// admit counts c against MaxConnectionsPerListener: beyond the cap it is closed (nil is returned),
// else it comes back wrapped so that closing it frees its place.
func (s *socket) admit(c net.Conn) net.Conn {
	limit := s.limits.MaxConnectionsPerListener
	if limit <= 0 {
		return c
	}
	if s.open.Add(1) > int64(limit) {
		s.open.Add(-1)
		n := s.capRejected.Add(1)
		if now, last := time.Now().UnixNano(), s.capWarned.Load(); now-last > int64(10*time.Second) && s.capWarned.CompareAndSwap(last, now) {
			s.log.Warn("connection cap reached; closing new connections", zap.String("listener", s.name),
				zap.String("address", s.ln.Addr().String()), zap.Int("max_connections", limit), zap.Int64("rejected_total", n))
		}
		_ = c.Close()
		return nil
	}
	release := func() { s.open.Add(-1) }
	if tc, ok := c.(*net.TCPConn); ok {
		return &countedTCPConn{TCPConn: tc, release: release}
	}
	return &countedConn{Conn: c, release: release}
}

// countedTCPConn is an accepted socket counted against the listener's connection cap until it is
// closed. It is the *net.TCPConn itself otherwise (readiness polling, splice, half-close).
type countedTCPConn struct {
	*net.TCPConn
	once    sync.Once
	release func()
}

func (c *countedTCPConn) Close() error {
	c.once.Do(c.release)
	return c.TCPConn.Close()
}

// NetTCPConn returns the socket, for splice(2) (see core.TCPConnOf).
func (c *countedTCPConn) NetTCPConn() *net.TCPConn { return c.TCPConn }

// countedConn is countedTCPConn for a listener that is not TCP (tests).
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// dispatch hands c to the current server. On a listener that requires the PROXY protocol (in the
// table current when c was accepted) the header is read first, off the accept loop.
func (s *socket) dispatch(c net.Conn) {
	if ls := s.state.Load(); ls != nil && ls.proxyProtocol != nil {
		go s.acceptProxied(c, *ls.proxyProtocol)
		return
	}
	s.deliver(c)
}

// deliver hands c to the current server; if that server is shutting down because the protocol
// just changed, to its successor.
func (s *socket) deliver(c net.Conn) {
	for {
		sv := s.cur.Load()
		if sv == nil {
			_ = c.Close()
			return
		}
		if sv.conns.Deliver(c) {
			return
		}
		if s.cur.Load() == sv {
			_ = c.Close()
			return
		}
	}
}

// requiresProxyProtocol reports whether the current table's listener on s requires the PROXY
// protocol.
func (s *socket) requiresProxyProtocol() bool {
	ls := s.state.Load()
	return ls != nil && ls.proxyProtocol != nil
}

// connContext stores the downstream connection in its context (ServeContext.ConnContext), with
// the client IP detection of the listener current when the connection started.
func (s *socket) connContext(ctx context.Context, c net.Conn) context.Context {
	if ls := s.state.Load(); ls != nil && ls.xffHops > 0 {
		return core.ContextWithClientIPDetection(ctx, c, ls.xffHops)
	}
	return core.ContextWithConn(ctx, c)
}

// ServeHTTP runs r on the socket's current table, holding a reference so that the table is not
// cleaned up under it.
func (s *socket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ls := s.acquire()
	if ls == nil {
		plainErrors{}.WriteError(w, r, http.StatusServiceUnavailable, "listener is shutting down")
		return
	}
	defer ls.table.release()
	if ls.altSvc != nil {
		w.Header()["Alt-Svc"] = ls.altSvc // this HTTPS listener serves HTTP/3 too (http3.go)
	}
	if ls.obs != nil {
		ls.serveObserved(w, r)
		return
	}
	ls.serveHTTP(w, r)
}

// acquire returns the current state with a reference on its table, or nil when the socket's last
// table has drained (the socket is being removed).
func (s *socket) acquire() *ListenerState {
	for {
		ls := s.state.Load()
		if ls == nil {
			return nil
		}
		if ls.table.tryAcquire() {
			return ls
		}
		if s.state.Load() == ls {
			return nil
		}
	}
}
