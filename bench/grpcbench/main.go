// Command grpcbench is the gRPC benchmark's two ends, both grpc-go: `serve` is the backend (the
// interop service grpc.testing.TestService, whose UnaryCall answers with a payload of the size the
// request asks for), and `load` is a closed-loop load generator that keeps a fixed number of unary
// calls in flight over a fixed number of connections and prints one JSON summary line (calls/s,
// latency percentiles from every call, failures by status code).
//
// The runner (bench/runner/grpc.go) starts the backend and runs the load on the load CPU, through
// each proxy and straight to the backend. Usage:
//
//	grpcbench serve -listen 127.0.0.1:18360
//	grpcbench load -target 127.0.0.1:18361 -conns 1 -concurrency 16 -duration 5s
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: grpcbench serve|load [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "load":
		err = load(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcbench:", err)
		os.Exit(1)
	}
}
