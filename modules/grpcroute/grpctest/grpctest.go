// Package grpctest is a real gRPC backend and client for tests of route.grpc, in the spirit of
// net/http/httptest: grpc-go's own interop service (grpc.testing.TestService) served over
// cleartext HTTP/2 on loopback, answering every kind of RPC and reporting what it received. Only
// tests import it.
package grpctest

import (
	"context"
	"errors"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Service is the full name of the interop service, as it appears in request paths.
const Service = "grpc.testing.TestService"

// Metadata keys the backend understands or sets.
const (
	// BackendKey is the response header naming the backend that answered.
	BackendKey = "x-backend"
	// TrailerKey is a response trailer every RPC ends with ("done-<backend>").
	TrailerKey = "x-trailer"
	// EchoPrefix prefixes the response headers that echo the request's "x-" metadata
	// ("echo-x-foo" carries the values of "x-foo", joined with ",").
	EchoPrefix = "echo-"
	// WaitKey makes UnaryCall wait until the call's context ends, then report its deadline on
	// Server.Deadlines.
	WaitKey = "x-wait"
)

// Deadline is what a waiting UnaryCall saw: whether its context had a deadline, how far away it
// was when the call arrived, and how the context ended.
type Deadline struct {
	Set       bool
	Remaining time.Duration
	Err       error
}

// Server is one running backend.
type Server struct {
	Name string
	// Addr is the bound "host:port".
	Addr string
	Port uint32
	// Deadlines receives one entry per UnaryCall that carried WaitKey.
	Deadlines chan Deadline

	srv *grpc.Server
	ln  *trackingListener
}

// Start serves the test service as name on a fresh loopback port until the test ends.
func Start(t testing.TB, name string) *Server {
	t.Helper()
	return StartAt(t, name, "127.0.0.1:0")
}

// StartAt serves the test service as name on addr ("host:port", port 0 for any).
func StartAt(t testing.TB, name, addr string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Name: name, Addr: ln.Addr().String(), Port: uint32(ln.Addr().(*net.TCPAddr).Port),
		Deadlines: make(chan Deadline, 16), srv: grpc.NewServer(), ln: &trackingListener{Listener: ln}}
	testgrpc.RegisterTestServiceServer(s.srv, &service{s: s})
	go func() { _ = s.srv.Serve(s.ln) }()
	t.Cleanup(s.srv.Stop)
	return s
}

// Stop closes the backend and its connections.
func (s *Server) Stop() { s.srv.Stop() }

// DropConnections aborts every connection the backend has accepted, as a crashed process would:
// no GOAWAY, no RST_STREAM, no trailers, a TCP reset (SO_LINGER 0). The server keeps accepting
// new connections.
func (s *Server) DropConnections() { s.ln.dropAll() }

// trackingListener remembers the connections it accepted, so a test can abort them.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *trackingListener) dropAll() {
	l.mu.Lock()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

// Dial returns a client of the test service at addr (cleartext HTTP/2 with prior knowledge, as
// gRPC does without TLS); the connection closes when the test ends.
func Dial(t testing.TB, addr string, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

type service struct {
	testgrpc.UnimplementedTestServiceServer
	s *Server
}

// begin sends the response header (backend name and the echo of the request's metadata) and sets
// the trailer every RPC ends with.
func (v *service) begin(ctx context.Context) error {
	md := metadata.Pairs(BackendKey, v.s.Name)
	in, _ := metadata.FromIncomingContext(ctx)
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, "x-") {
			md.Append(EchoPrefix+k, strings.Join(in[k], ","))
		}
	}
	if err := grpc.SetHeader(ctx, md); err != nil {
		return err
	}
	return grpc.SetTrailer(ctx, metadata.Pairs(TrailerKey, "done-"+v.s.Name))
}

func echoStatus(es *testgrpc.EchoStatus) error {
	if es == nil || es.GetCode() == 0 {
		return nil
	}
	return status.Error(codes.Code(es.GetCode()), es.GetMessage())
}

// UnaryCall answers with the backend's name and the request's payload, or with the status the
// request asks for; with WaitKey it waits for the call's context to end.
func (v *service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if err := v.begin(ctx); err != nil {
		return nil, err
	}
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(WaitKey)) > 0 {
		var d Deadline
		if dl, ok := ctx.Deadline(); ok {
			d.Set, d.Remaining = true, time.Until(dl)
		}
		<-ctx.Done()
		d.Err = ctx.Err()
		v.s.Deadlines <- d
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if err := echoStatus(req.GetResponseStatus()); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{Hostname: v.s.Name, Payload: req.GetPayload()}, nil
}

// EmptyCall answers nothing, quickly (the benchmark's call), with only the backend's name in
// the response header.
func (v *service) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	if err := grpc.SetHeader(ctx, metadata.Pairs(BackendKey, v.s.Name)); err != nil {
		return nil, err
	}
	return &testgrpc.Empty{}, nil
}

// StreamingOutputCall sends one message per response parameter, each with a payload of its size.
func (v *service) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	if err := v.begin(st.Context()); err != nil {
		return err
	}
	for _, p := range req.GetResponseParameters() {
		if d := time.Duration(p.GetIntervalUs()) * time.Microsecond; d > 0 {
			select {
			case <-time.After(d):
			case <-st.Context().Done():
				return status.FromContextError(st.Context().Err()).Err()
			}
		}
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: payload(int(p.GetSize()))}); err != nil {
			return err
		}
	}
	return echoStatus(req.GetResponseStatus())
}

// StreamingInputCall adds up the payload sizes of every message until the client half-closes.
func (v *service) StreamingInputCall(st grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	if err := v.begin(st.Context()); err != nil {
		return err
	}
	var n int32
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return st.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n += int32(len(req.GetPayload().GetBody()))
	}
}

// FullDuplexCall answers every message as soon as it arrives, so a client can play ping-pong
// with it: one message per response parameter, each echoing the request's payload body when the
// size is 0.
func (v *service) FullDuplexCall(st grpc.BidiStreamingServer[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]) error {
	if err := v.begin(st.Context()); err != nil {
		return err
	}
	for {
		req, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := echoStatus(req.GetResponseStatus()); err != nil {
			return err
		}
		for _, p := range req.GetResponseParameters() {
			out := req.GetPayload()
			if p.GetSize() > 0 {
				out = payload(int(p.GetSize()))
			}
			if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: out}); err != nil {
				return err
			}
		}
	}
}

func payload(n int) *testgrpc.Payload {
	return &testgrpc.Payload{Body: make([]byte, n)}
}
