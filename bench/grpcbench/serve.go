package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// serve runs the backend until SIGTERM or SIGINT.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:18360", "listen address (cleartext HTTP/2, gRPC)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, &service{})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		srv.Stop()
	}()
	fmt.Fprintln(os.Stderr, "grpc backend ready on", ln.Addr())
	return srv.Serve(ln)
}

// service answers UnaryCall with ResponseSize bytes (payloads are shared, not built per call) and
// EmptyCall with nothing.
type service struct {
	testgrpc.UnimplementedTestServiceServer
}

var payloads = map[int32]*testgrpc.Payload{}

func payload(n int32) *testgrpc.Payload {
	if p, ok := payloads[n]; ok {
		return p
	}
	return &testgrpc.Payload{Body: make([]byte, n)}
}

func init() {
	for _, n := range []int32{0, 12, 1 << 10, 16 << 10} {
		payloads[n] = &testgrpc.Payload{Body: make([]byte, n)}
	}
}

func (*service) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	return &testgrpc.Empty{}, nil
}

func (*service) UnaryCall(_ context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Payload: payload(req.GetResponseSize())}, nil
}
