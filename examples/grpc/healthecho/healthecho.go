// Package healthecho is the gRPC example's backend and client, built on grpc-go's own health
// service (grpc.health.v1.Health) so the example needs no generated code of its own. The backend
// answers Check and List with SERVING and tells, in response headers, which backend it is and
// what "x-" metadata it received, so a client can see where a GRPCRoute sent its call and what
// the route's filters changed on the way.
//
// examples/grpc/server and examples/grpc/client are its commands; test/e2e runs it in-process.
package healthecho

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

const (
	// BackendKey is the response header naming the backend that answered.
	BackendKey = "x-backend"
	// EchoPrefix prefixes the response headers echoing the request's "x-" metadata:
	// "echo-x-foo" carries the values of "x-foo".
	EchoPrefix = "echo-"
)

// Backend is a health service that names itself. It does not implement Watch: the example's
// GRPCRoute does not route it, so the proxy answers it (UNIMPLEMENTED) before it gets here.
type Backend struct {
	healthpb.UnimplementedHealthServer
	Name string
}

var _ healthpb.HealthServer = (*Backend)(nil)

// Serve serves a Backend named name on ln until ctx ends, then stops gracefully.
func Serve(ctx context.Context, name string, ln net.Listener) error {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, &Backend{Name: name})
	stop := context.AfterFunc(ctx, srv.GracefulStop)
	defer stop()
	return srv.Serve(ln)
}

// Check implements healthpb.HealthServer: SERVING, whatever the service asked about.
func (b *Backend) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if err := grpc.SetHeader(ctx, b.header(ctx)); err != nil {
		return nil, err
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// List implements healthpb.HealthServer: one service, named after the backend, SERVING.
func (b *Backend) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	if err := grpc.SetHeader(ctx, b.header(ctx)); err != nil {
		return nil, err
	}
	return &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{
		b.Name: {Status: healthpb.HealthCheckResponse_SERVING},
	}}, nil
}

// header is the response header: the backend's name and an echo of the request's "x-" metadata.
func (b *Backend) header(ctx context.Context) metadata.MD {
	md := metadata.Pairs(BackendKey, b.Name)
	in, _ := metadata.FromIncomingContext(ctx)
	for k, v := range in {
		if strings.HasPrefix(k, "x-") {
			md.Append(EchoPrefix+k, v...)
		}
	}
	return md
}

// Result is what one call through the proxy came back with.
type Result struct {
	// Backend is the backend that answered.
	Backend string
	// Status is Check's status, or List's status of the backend's own entry.
	Status string
	// Echoed is the "x-" metadata the backend received, as "key=value", sorted.
	Echoed []string
}

func (r Result) String() string {
	s := fmt.Sprintf("backend=%s status=%s", r.Backend, r.Status)
	if len(r.Echoed) > 0 {
		s += " received: " + strings.Join(r.Echoed, " ")
	}
	return s
}

// Dial connects to a gRPC server (the proxy) in cleartext HTTP/2.
func Dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Call makes one call, "check" or "list", with the metadata md.
func Call(ctx context.Context, conn *grpc.ClientConn, method string, md metadata.MD) (Result, error) {
	ctx = metadata.NewOutgoingContext(ctx, md)
	client := healthpb.NewHealthClient(conn)
	var header metadata.MD
	var status string
	switch method {
	case "check":
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&header))
		if err != nil {
			return Result{}, err
		}
		status = resp.GetStatus().String()
	case "list":
		resp, err := client.List(ctx, &healthpb.HealthListRequest{}, grpc.Header(&header))
		if err != nil {
			return Result{}, err
		}
		for _, st := range resp.GetStatuses() {
			status = st.GetStatus().String()
		}
	case "watch":
		stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return Result{}, err
		}
		if _, err := stream.Recv(); err != nil {
			return Result{}, err
		}
		return Result{}, fmt.Errorf("watch: unexpected answer")
	default:
		return Result{}, fmt.Errorf("unknown method %q (check, list or watch)", method)
	}
	return resultOf(header, status), nil
}

func resultOf(header metadata.MD, status string) Result {
	r := Result{Status: status}
	if v := header.Get(BackendKey); len(v) > 0 {
		r.Backend = v[0]
	}
	for k, v := range header {
		if name, ok := strings.CutPrefix(k, EchoPrefix); ok {
			r.Echoed = append(r.Echoed, name+"="+strings.Join(v, ","))
		}
	}
	sort.Strings(r.Echoed)
	return r
}
