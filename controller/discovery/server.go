package discovery

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
)

// Options configure a Server. Log, CA and Authenticate are required.
type Options struct {
	Log *zap.Logger
	// CA signs SVIDs and the serving certificate; its bundle verifies proxies.
	CA *CA
	// Authenticate checks bootstrap tokens: TokenReviewAuthenticator in a cluster.
	Authenticate Authenticator
	// SVIDTTL is how long an issued SVID is valid (1h when zero). Proxies renew at half life.
	SVIDTTL time.Duration
	// SharedProxies are the ServiceAccounts ("<namespace>/<name>") whose proxies may connect in
	// shared mode and so receive every Gateway's routes and certificates.
	SharedProxies []string
	// DedicatedServiceAccount names the ServiceAccount a dedicated proxy of a Gateway must run as;
	// DedicatedServiceAccount (the function of this package) when nil.
	DedicatedServiceAccount func(gatewayNamespace, gatewayName string) (namespace, name string)
	// ServerNames go into the serving certificate (DNS names or IPs) for clients that check
	// host names; coxswain proxies check the controller's SPIFFE ID instead.
	ServerNames []string
	// Metrics receives the discovery series; none are registered when nil.
	Metrics prometheus.Registerer
	// HelloTimeout bounds how long a new stream may take to say Hello (10s when zero).
	HelloTimeout time.Duration
}

// DedicatedServiceAccount is the default ServiceAccount of a Gateway's dedicated proxies:
// "coxswain-<gateway>" in the Gateway's namespace.
func DedicatedServiceAccount(namespace, name string) (string, string) {
	return namespace, "coxswain-" + name
}

// Server is the discovery endpoint: BootstrapService on every replica, DiscoveryService on the
// leader only. Its NewPublisher starts a leadership term; between terms streams are refused with
// FAILED_PRECONDITION so proxies look for the leader elsewhere.
type Server struct {
	opts    Options
	log     *zap.Logger
	grpc    *grpc.Server
	metrics *metrics
	shared  map[string]bool
	term    atomic.Pointer[term]

	discv1.UnimplementedDiscoveryServiceServer
}

var _ discv1.DiscoveryServiceServer = (*Server)(nil)

// maxProxyMessage bounds what a proxy may send (Hello with its module list, NodeStatus).
const maxProxyMessage = 1 << 20

// New builds a Server; Serve starts it on a listener.
func New(opts Options) (*Server, error) {
	if opts.Log == nil || opts.CA == nil || opts.Authenticate == nil {
		return nil, errors.New("discovery server: Log, CA and Authenticate are required")
	}
	if opts.SVIDTTL <= 0 {
		opts.SVIDTTL = time.Hour
	}
	if opts.HelloTimeout <= 0 {
		opts.HelloTimeout = 10 * time.Second
	}
	if opts.DedicatedServiceAccount == nil {
		opts.DedicatedServiceAccount = DedicatedServiceAccount
	}
	s := &Server{opts: opts, log: opts.Log, metrics: newMetrics(opts.Metrics), shared: map[string]bool{}}
	for _, sa := range opts.SharedProxies {
		ns, name, ok := strings.Cut(sa, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("shared proxy ServiceAccount %q is not <namespace>/<name>", sa)
		}
		s.shared[sa] = true
	}
	names := opts.ServerNames
	if _, err := opts.CA.ServerCertificate(names); err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	tlsCfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		// A client certificate is optional at the TLS layer because bootstrapping proxies have
		// none yet; one that is given must verify, and Stream demands one.
		ClientAuth: tls.VerifyClientCertIfGiven,
		ClientCAs:  opts.CA.Pool(),
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return opts.CA.ServerCertificate(names)
		},
	}
	s.grpc = grpc.NewServer(
		grpc.Creds(&refusingCreds{TransportCredentials: credentials.NewTLS(tlsCfg), log: opts.Log, metrics: s.metrics}),
		grpc.MaxRecvMsgSize(maxProxyMessage),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	)
	discv1.RegisterBootstrapServiceServer(s.grpc, &bootstrap{log: opts.Log.Named("bootstrap"), ca: opts.CA,
		auth: opts.Authenticate, ttl: opts.SVIDTTL, metrics: s.metrics, reviews: make(chan struct{}, maxConcurrentReviews)})
	discv1.RegisterDiscoveryServiceServer(s.grpc, s)
	return s, nil
}

// Serve accepts connections on ln until Stop.
func (s *Server) Serve(ln net.Listener) error {
	if err := s.grpc.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Stop ends every stream and stops serving.
func (s *Server) Stop() { s.grpc.Stop() }

// Leading reports whether a leadership term is running: streams are accepted.
func (s *Server) Leading() bool { return s.term.Load() != nil }

// NewPublisher starts a leadership term: streams are accepted until the Publisher is closed.
func (s *Server) NewPublisher(_ context.Context, report controller.Reporter) (controller.Publisher, error) {
	t := newTerm(s, report)
	if !s.term.CompareAndSwap(nil, t) {
		return nil, errors.New("a leadership term is already running")
	}
	s.log.Info("discovery: leading, accepting proxy streams")
	return t, nil
}

var _ controller.NewPublisher = (*Server)(nil).NewPublisher

// Stream is one proxy's session.
func (s *Server) Stream(stream discv1.DiscoveryService_StreamServer) error {
	ctx := stream.Context()
	id, notAfter, err := peerSVID(ctx)
	if err != nil {
		s.metrics.refused("no_svid")
		s.log.Warn("discovery stream refused", zap.String("reason", "no_svid"), zap.String("peer", peerAddr(ctx)), zap.Error(err))
		return status.Error(codes.Unauthenticated, err.Error())
	}
	hello, err := s.recvHello(stream)
	if err != nil {
		reason := "bad_hello"
		if status.Code(err) == codes.FailedPrecondition {
			reason = "wire_version"
		}
		s.metrics.refused(reason)
		s.log.Warn("discovery stream refused", zap.String("reason", reason), zap.String("spiffeID", id.String()),
			zap.String("peer", peerAddr(ctx)), zap.Error(err))
		return err
	}
	// Identity first: a proxy that may not connect learns it from any replica.
	if err := s.authorize(id, hello); err != nil {
		s.metrics.refused("identity")
		s.log.Warn("discovery stream refused", zap.String("reason", "identity"), zap.String("spiffeID", id.String()), zap.String("node", hello.GetNode()), zap.Error(err))
		return status.Error(codes.PermissionDenied, err.Error())
	}
	t := s.term.Load()
	if t == nil {
		s.metrics.refused("standby")
		return status.Error(codes.FailedPrecondition, "this controller is a standby: connect to the leader")
	}
	sess := newSession(ctx, t, id, hello, notAfter)
	if !t.add(sess) {
		s.metrics.refused("standby")
		return status.Error(codes.FailedPrecondition, "leadership ended: connect to the leader")
	}
	defer t.remove(sess)
	// Tell the proxy it reached the leader now, not with the first Push: there is none when it
	// already serves the current snapshot (a failover, a reconnect after an outage).
	if err := stream.SendHeader(metadata.Pairs(discv1.LeaderHeader, "1")); err != nil {
		return err
	}
	return sess.run(stream)
}

// peerAddr is the stream's remote address, for log lines.
func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// peerSVID is the verified SVID the stream's peer presented: its ID and expiry.
func peerSVID(ctx context.Context) (svid.ID, time.Time, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return svid.ID{}, time.Time{}, errors.New("no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return svid.ID{}, time.Time{}, errors.New("a client certificate (an SVID from the bootstrap endpoint) is required")
	}
	leaf := info.State.VerifiedChains[0][0]
	var id svid.ID
	var err error
	for _, u := range leaf.URIs {
		if u.Scheme == "spiffe" {
			id, err = svid.ParseID(u)
			return id, leaf.NotAfter, err
		}
	}
	return svid.ID{}, time.Time{}, errors.New("the client certificate carries no SPIFFE ID")
}

// recvHello reads the stream's first message, which must be a Hello, within HelloTimeout.
func (s *Server) recvHello(stream discv1.DiscoveryService_StreamServer) (*discv1.Hello, error) {
	type result struct {
		req *discv1.StreamRequest
		err error
	}
	ch := make(chan result, 1)
	go func() {
		req, err := stream.Recv()
		ch <- result{req, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(s.opts.HelloTimeout):
		return nil, status.Error(codes.DeadlineExceeded, "no Hello in time")
	}
	if r.err != nil {
		return nil, r.err
	}
	h := r.req.GetHello()
	switch {
	case h == nil:
		return nil, status.Error(codes.InvalidArgument, "the first message must be a Hello")
	case h.GetWireVersion() != discv1.WireVersion_WIRE_VERSION_1:
		return nil, status.Errorf(codes.FailedPrecondition, "wire version %v is not spoken here (this controller speaks %v)",
			h.GetWireVersion(), discv1.WireVersion_WIRE_VERSION_1)
	case h.GetNode() == "":
		return nil, status.Error(codes.InvalidArgument, "Hello names no node")
	}
	return h, nil
}

// authorize checks that the SVID may connect in the mode the Hello asks for: a shared proxy must
// run as one of the SharedProxies ServiceAccounts, a dedicated proxy as its Gateway's.
func (s *Server) authorize(id svid.ID, h *discv1.Hello) error {
	if id.TrustDomain != s.opts.CA.TrustDomain() {
		return fmt.Errorf("SPIFFE ID %s is not of trust domain %s", id, s.opts.CA.TrustDomain())
	}
	switch h.GetMode() {
	case discv1.Mode_MODE_SHARED:
		if h.GetGateway() != nil {
			return errors.New("a shared proxy names no Gateway")
		}
		if !s.shared[id.Subject()] {
			return fmt.Errorf("ServiceAccount %s may not run a shared proxy", id.Subject())
		}
	case discv1.Mode_MODE_DEDICATED:
		gw := h.GetGateway()
		if gw.GetNamespace() == "" || gw.GetName() == "" {
			return errors.New("a dedicated proxy must name its Gateway")
		}
		ns, sa := s.opts.DedicatedServiceAccount(gw.GetNamespace(), gw.GetName())
		if id.Namespace != ns || id.ServiceAccount != sa {
			return fmt.Errorf("Gateway %s/%s is served by ServiceAccount %s/%s, not %s", gw.GetNamespace(), gw.GetName(), ns, sa, id.Subject())
		}
	default:
		return fmt.Errorf("unknown mode %v", h.GetMode())
	}
	return nil
}
