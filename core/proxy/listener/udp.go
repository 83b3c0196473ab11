package listener

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// UDPModuleID is the UDP listener of UDPRoutes.
const UDPModuleID core.ModuleID = "listener.udp"

func init() {
	core.RegisterModule(&UDP{})
}

// UDP serves a UDP port with a datagram route (route.udp). It keeps one session per client
// address: the first datagram from a client opens a session through the oldest route attached
// (which picks a backend by weight and pins it), later datagrams go to that session, and the
// session's replies leave from the listener's own socket, so the client sees one peer. A session
// idle for UDPSessionTimeout is evicted. UDPMaxSessions bounds the table: datagrams from new
// clients beyond it are dropped and counted (Stats), so a flood of spoofed source addresses costs
// a bounded amount of memory and upstream sockets.
//
// Sessions belong to the socket, not to a table: they hold a reference on the table they were
// opened with and keep their backend across snapshots until they go idle, as an established TCP
// connection does.
type UDP struct{}

var (
	_ proxy.PacketListener = (*UDP)(nil)
	_ proxy.RouteAPIer     = (*UDP)(nil)
)

// CoxswainModule implements core.Module.
func (*UDP) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: UDPModuleID, New: func() core.Module { return new(UDP) }}
}

// ServesPackets implements proxy.PacketListener.
func (*UDP) ServesPackets() {}

// RouteAPI implements proxy.RouteAPIer.
func (*UDP) RouteAPI() proxy.RouteAPI { return proxy.RouteAPIDatagram }

// Check implements proxy.StreamListener.
func (*UDP) Check(l *irv1.Listener) error { return checkPortKeyed(l) }

// NewServer implements proxy.StreamListener.
func (*UDP) NewServer(sc proxy.ServeContext) proxy.ConnServer {
	timeout := proxy.Positive(sc.Limits.UDPSessionTimeout)
	if timeout == 0 {
		timeout = 365 * 24 * time.Hour
	}
	return &udpServer{
		sc: sc, pc: sc.Packet, timeout: timeout, max: sc.Limits.UDPMaxSessions,
		sweep:    min(max(timeout/4, 10*time.Millisecond), time.Second),
		sessions: map[netip.AddrPort]*udpSession{},
		stopped:  make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// maxDatagram is the largest UDP payload.
const maxDatagram = 64 << 10

// socketBuffer is the receive and send buffer size asked for the listener socket.
const socketBuffer = 7 << 20

type udpServer struct {
	sc      proxy.ServeContext
	pc      *net.UDPConn
	timeout time.Duration
	max     int
	sweep   time.Duration

	// sessions is owned by the read loop.
	sessions map[netip.AddrPort]*udpSession
	stats    udpStats

	stopOnce sync.Once
	stopped  chan struct{} // closed to stop the read loop
	done     chan struct{} // closed when the read loop has returned and sessions are closed
	dropLog  time.Time
}

type udpStats struct {
	sessions, opened, evicted, droppedCap, droppedNoRoute, openFailed, sendFailed atomic.Int64
}

type udpSession struct {
	s     core.Session
	ls    *proxy.ListenerState
	t     proxy.DatagramTarget
	start time.Time
	last  atomic.Int64 // unix nanoseconds of the last datagram either way
	in    int64        // payload bytes from the client (the read loop's)
	out   atomic.Int64 // payload bytes to the client (replies)
}

var (
	_ proxy.ConnServer    = (*udpServer)(nil)
	_ proxy.StatsReporter = (*udpServer)(nil)
)

// Serve implements proxy.ConnServer. l yields no connections; its closing stops the server.
func (s *udpServer) Serve(l net.Listener) error {
	go func() {
		_, _ = l.Accept() // returns once l is closed
		s.stop()
	}()
	defer close(s.done)
	defer s.closeSessions()
	if s.pc == nil {
		return errors.New("listener.udp needs a UDP socket")
	}
	// Large socket buffers absorb bursts the single read loop cannot take at once (quic-go does
	// the same); the kernel caps them at net.core.rmem_max / wmem_max, which is fine.
	_ = s.pc.SetReadBuffer(socketBuffer)
	_ = s.pc.SetWriteBuffer(socketBuffer)
	buf := make([]byte, maxDatagram)
	lastSweep := time.Now()
	_ = s.pc.SetReadDeadline(lastSweep.Add(s.sweep))
	for {
		n, addr, err := s.pc.ReadFromUDPAddrPort(buf)
		now := time.Now()
		if now.Sub(lastSweep) >= s.sweep {
			lastSweep = now
			s.evictIdle(now)
			_ = s.pc.SetReadDeadline(now.Add(s.sweep))
		}
		if err != nil {
			select {
			case <-s.stopped:
				return net.ErrClosed
			default:
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			s.sc.Log.Debug("UDP read failed", zap.Error(err))
			continue
		}
		s.datagram(now, addr, buf[:n])
	}
}

// datagram hands one client datagram to its session, opening one if needed.
func (s *udpServer) datagram(now time.Time, client netip.AddrPort, b []byte) {
	sess := s.sessions[client]
	if sess == nil {
		if sess = s.open(client); sess == nil {
			return
		}
	}
	sess.last.Store(now.UnixNano())
	sess.in += int64(len(b))
	if err := sess.s.Send(b); err != nil {
		// A connected UDP socket reports an earlier ICMP unreachable here; the session stays, and
		// eviction ends it if the backend stays silent.
		s.stats.sendFailed.Add(1)
	}
}

func (s *udpServer) open(client netip.AddrPort) *udpSession {
	if len(s.sessions) >= s.max {
		s.stats.droppedCap.Add(1)
		if now := time.Now(); now.Sub(s.dropLog) >= 10*time.Second {
			s.dropLog = now
			s.sc.Log.Warn("UDP session table full; dropping datagrams from new clients",
				zap.Int("maxSessions", s.max), zap.Int64("droppedSoFar", s.stats.droppedCap.Load()))
		}
		return nil
	}
	ls := s.sc.Acquire()
	if ls == nil {
		s.stats.droppedNoRoute.Add(1)
		return nil
	}
	t, ok := ls.DatagramRoute()
	if !ok {
		ls.Release()
		s.stats.droppedNoRoute.Add(1)
		return nil
	}
	sess := &udpSession{ls: ls, t: t, start: time.Now()}
	reply := func(b []byte) error {
		sess.last.Store(time.Now().UnixNano())
		n, err := s.pc.WriteToUDPAddrPort(b, client)
		sess.out.Add(int64(n))
		return err
	}
	ds, err := t.Route.OpenSession(context.Background(), &core.DatagramSession{Client: client, Upstream: t.Upstream, Reply: reply})
	if err != nil {
		ls.Release()
		s.stats.openFailed.Add(1)
		if ce := s.sc.Log.Check(zap.DebugLevel, "UDP session not opened"); ce != nil {
			ce.Write(zap.Stringer("client", client), zap.String("route", t.Name), zap.Error(err))
		}
		return nil
	}
	sess.s = ds
	s.sessions[client] = sess
	s.stats.opened.Add(1)
	s.stats.sessions.Add(1)
	return sess
}

// evictIdle closes the sessions idle for the session timeout.
func (s *udpServer) evictIdle(now time.Time) {
	cutoff := now.Add(-s.timeout).UnixNano()
	for client, sess := range s.sessions {
		if sess.last.Load() <= cutoff {
			s.closeSession(client, sess)
			s.stats.evicted.Add(1)
		}
	}
}

func (s *udpServer) closeSession(client netip.AddrPort, sess *udpSession) {
	delete(s.sessions, client)
	_ = sess.s.Close()
	sess.t.Ended(proxy.SessionEnd{Client: client, Start: sess.start, BytesFromClient: sess.in,
		BytesToClient: sess.out.Load(), Session: sess.s})
	sess.ls.Release()
	s.stats.sessions.Add(-1)
}

func (s *udpServer) closeSessions() {
	for client, sess := range s.sessions {
		s.closeSession(client, sess)
	}
}

func (s *udpServer) stop() {
	s.stopOnce.Do(func() {
		close(s.stopped)
		if s.pc != nil {
			_ = s.pc.SetReadDeadline(time.Now()) // wake the read loop
		}
	})
}

// Shutdown implements proxy.ConnServer. UDP has no connections to wait for: sessions end with the
// read loop.
func (s *udpServer) Shutdown(ctx context.Context) error {
	s.stop()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements proxy.ConnServer.
func (s *udpServer) Close() error {
	s.stop()
	return nil
}

// Stats implements proxy.StatsReporter.
func (s *udpServer) Stats() map[string]int64 {
	return map[string]int64{
		"udp_sessions":                  s.stats.sessions.Load(),
		"udp_sessions_opened":           s.stats.opened.Load(),
		"udp_sessions_evicted":          s.stats.evicted.Load(),
		"udp_datagrams_dropped_cap":     s.stats.droppedCap.Load(),
		"udp_datagrams_dropped_noroute": s.stats.droppedNoRoute.Load(),
		"udp_sessions_open_failed":      s.stats.openFailed.Load(),
		"udp_datagrams_send_failed":     s.stats.sendFailed.Load(),
	}
}
