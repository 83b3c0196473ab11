package udproute

import (
	"context"
	"errors"
	"net"
	"sync"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

// ModuleID is the route kind this package registers.
const ModuleID core.ModuleID = "route.udp"

func init() {
	core.RegisterModule((*Route)(nil))
}

// Route is the route.udp module. Its config is empty: a UDPRoute rule is its backends, which the
// engine compiles into core.DatagramSession.Upstream.
type Route struct {
	log *zap.Logger
}

var (
	_ core.DatagramRoute = (*Route)(nil)
	_ core.Provisioner   = (*Route)(nil)
)

// CoxswainModule implements core.Module.
func (*Route) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Route) }}
}

// Provision implements core.Provisioner.
func (r *Route) Provision(bc *core.BuildContext) error {
	r.log = bc.Log
	return nil
}

// maxDatagram is the largest UDP payload.
const maxDatagram = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, maxDatagram); return &b }}

// OpenSession implements core.DatagramRoute: it connects a UDP socket to a backend chosen by
// weight and starts relaying that socket's datagrams back to the client.
func (r *Route) OpenSession(ctx context.Context, ds *core.DatagramSession) (core.Session, error) {
	c, done, err := ds.Upstream.Dial(ctx, net.UDPAddrFromAddrPort(ds.Client))
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UDPConn)
	if !ok {
		_ = c.Close()
		done()
		return nil, errors.New("route.udp: upstream is not a UDP socket")
	}
	s := &session{up: uc, done: done, reply: ds.Reply, log: r.log, addr: uc.RemoteAddr().String()}
	go s.relay()
	return s, nil
}

type session struct {
	up    *net.UDPConn
	done  func()
	reply func([]byte) error
	log   *zap.Logger
	once  sync.Once
	addr  string // the endpoint, for the access log
}

var _ core.SessionUpstream = (*session)(nil)

// UpstreamAddr implements core.SessionUpstream.
func (s *session) UpstreamAddr() string { return s.addr }

// Send implements core.Session.
func (s *session) Send(b []byte) error {
	_, err := s.up.Write(b)
	return err
}

// Close implements core.Session.
func (s *session) Close() error {
	var err error
	s.once.Do(func() {
		err = s.up.Close()
		s.done()
	})
	return err
}

// relay sends the backend's datagrams to the client until the session is closed.
func (s *session) relay() {
	for {
		err := readDatagram(s.up, s.reply)
		if err == nil {
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		// An ICMP unreachable from the backend surfaces as a read error on a connected socket;
		// the session stays until it is evicted.
		if s.log != nil {
			if ce := s.log.Check(zap.DebugLevel, "UDP upstream read failed"); ce != nil {
				ce.Write(zap.Stringer("upstream", s.up.RemoteAddr()), zap.Error(err))
			}
		}
	}
}
