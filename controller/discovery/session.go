package discovery

import (
	"context"
	"errors"
	"io"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
)

var (
	errReplaced = errors.New("replaced by a newer stream of the same node")
	errExpired  = errors.New("the client certificate expired: reconnect with the renewed one")
)

// session is one connected proxy. The fields after the mutex note are guarded by its term's mu.
type session struct {
	t         *term
	ctx       context.Context
	cancel    context.CancelCauseFunc
	id        svid.ID
	hello     *discv1.Hello
	node      string
	gw        *gwKey // a dedicated proxy's Gateway
	modules   map[string]bool
	notAfter  time.Time
	connected time.Time
	wake      chan struct{}
	deltas    bool // the proxy said it applies deltas (Hello.deltas)

	// guarded by t.mu
	serving    string // the version the proxy serves, as far as we know
	sentSeq    uint64 // the latest sequence handled (sent, or found equal to what it serves)
	inflight   *flight
	acked      flight
	nack       *nacked
	bound      map[string]bool
	boundList  []*discv1.BoundListener
	failed     map[string]*discv1.ListenerFailure // snapshot listeners the proxy cannot bind, by name
	failedList []*discv1.ListenerFailure
	last       *prepared // the snapshot last sent (or found equal)
	// base is the snapshot the proxy acknowledged last (or was found to serve): what a delta is
	// against. full says the next push goes in full whatever base is: after a Nack.
	base      *prepared
	full      bool
	lastBytes int      // the size of the last push sent
	lastDelta bool     // and whether it was a delta
	missing   []string // modules the latest snapshot names that the proxy lacks
	tailorKey string   // the tailoring its latest push was cut with (term.tailors)
	missingOf uint64   // the sequence missing was computed for
}

// flight is a push: sent and not answered yet, or acknowledged.
type flight struct {
	seq     uint64
	version string
	prep    *prepared // what was sent: the proxy's base once acknowledged
	delta   bool      // sent as a delta
	sent    time.Time // when it was sent
	due     time.Time // when the proxy should have started getting it: publication or connection
	at      time.Time // when it was acknowledged
}

type nacked struct {
	seq     uint64
	version string
	err     string
	at      time.Time
}

func newSession(ctx context.Context, t *term, id svid.ID, h *discv1.Hello, notAfter time.Time) *session {
	ctx, cancel := context.WithCancelCause(ctx)
	s := &session{t: t, ctx: ctx, cancel: cancel, id: id, hello: h, node: h.GetNode(), notAfter: notAfter,
		connected: time.Now(), wake: make(chan struct{}, 1), serving: h.GetVersion(), modules: map[string]bool{},
		deltas: h.GetDeltas()}
	if g := h.GetGateway(); h.GetMode() == discv1.Mode_MODE_DEDICATED && g != nil {
		s.gw = &gwKey{g.GetNamespace(), g.GetName()}
	}
	for _, m := range h.GetModules() {
		s.modules[m] = true
	}
	return s
}

func (s *session) fields() []zap.Field {
	f := []zap.Field{zap.String("node", s.node), zap.String("spiffeID", s.id.String())}
	if s.gw != nil {
		f = append(f, zap.String("gateway", s.gw.String()))
	}
	return f
}

func (s *session) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// serves reports whether the proxy serves Gateway k: a shared proxy serves them all.
func (s *session) serves(k gwKey) bool {
	if s.gw == nil || *s.gw == k {
		return true
	}
	p, ok := s.t.latestParents()[k] // a ListenerSet of the proxy's Gateway
	return ok && p == *s.gw
}

// missingFor is what of p's modules the proxy lacks (t.mu held). A change is logged: the
// rules needing them answer an error on this proxy (500, or gRPC UNAVAILABLE) and their routes
// carry ModulesAvailable=False.
func (s *session) missingFor(p *published) []string {
	if s.missingOf == p.seq {
		return s.missing
	}
	m := missingModules(p.modules, s.modules)
	if !equalStrings(m, s.missing) && len(m) > 0 {
		s.t.log.Warn("proxy lacks modules the snapshot names: it gets the snapshot without them (rules needing them answer an error there; their routes carry ModulesAvailable=False)",
			append(s.fields(), zap.Strings("missing", m))...)
	}
	s.missing, s.missingOf = m, p.seq
	return m
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// run serves the session until the proxy goes away, the term ends or the SVID expires. Receiving
// happens on its own goroutine; sending, one push at a time, on this one.
func (s *session) run(stream discv1.DiscoveryService_StreamServer) error {
	expire := time.AfterFunc(time.Until(s.notAfter), func() { s.cancel(errExpired) })
	defer expire.Stop()
	defer s.cancel(nil)
	go s.recv(stream)
	for {
		if s.ctx.Err() != nil {
			return endStatus(context.Cause(s.ctx))
		}
		if push := s.t.next(s); push != nil {
			if err := stream.Send(push); err != nil {
				s.cancel(err)
			}
			continue
		}
		select {
		case <-s.wake:
		case <-s.ctx.Done():
		}
	}
}

func (s *session) recv(stream discv1.DiscoveryService_StreamServer) {
	for {
		req, err := stream.Recv()
		if err != nil {
			s.cancel(err)
			return
		}
		switch k := req.GetKind().(type) {
		case *discv1.StreamRequest_Ack:
			s.t.ack(s, k.Ack)
		case *discv1.StreamRequest_Nack:
			s.t.nack(s, k.Nack)
		case *discv1.StreamRequest_NodeStatus:
			s.t.nodeStatus(s, k.NodeStatus)
		case *discv1.StreamRequest_Hello:
			s.cancel(status.Error(codes.InvalidArgument, "Hello sent twice"))
			return
		default:
			// A message kind of a newer revision: ignored, as compatible additions must be.
		}
	}
}

// endStatus is what the handler returns for why the session ended.
func endStatus(cause error) error {
	switch {
	case cause == nil, errors.Is(cause, io.EOF), errors.Is(cause, context.Canceled):
		return nil
	case errors.Is(cause, errTermEnded):
		return status.Error(codes.Unavailable, "leadership ended: connect to the new leader")
	case errors.Is(cause, errReplaced):
		return status.Error(codes.Aborted, cause.Error())
	case errors.Is(cause, errExpired):
		return status.Error(codes.Unauthenticated, cause.Error())
	}
	if _, ok := status.FromError(cause); ok {
		return cause
	}
	return status.Error(codes.Unknown, cause.Error())
}
