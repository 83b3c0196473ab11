// Command server is the gRPC example's backend: grpc.health.v1.Health on several loopback ports,
// each answering with its own name (package healthecho).
//
//	go run ./examples/grpc/server -listen v1=127.0.0.1:9311,v2=127.0.0.1:9312
//
// Only loopback addresses are accepted: this is a demo backend, not something to expose.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/coxswain-labs/coxswain/examples/grpc/healthecho"
)

func main() {
	listen := flag.String("listen", "v1=127.0.0.1:9311,v2=127.0.0.1:9312",
		"comma-separated name=address list of loopback addresses to serve")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen); err != nil {
		log.Fatalf("server: %v", err)
	}
}

func run(ctx context.Context, spec string) error {
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for _, item := range strings.Split(spec, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return fmt.Errorf("%q: want name=address", item)
		}
		ln, err := listenLoopback(addr)
		if err != nil {
			return err
		}
		log.Printf("gRPC backend %q listening on %s", name, ln.Addr())
		wg.Go(func() {
			if err := healthecho.Serve(ctx, name, ln); err != nil {
				select {
				case errs <- fmt.Errorf("backend %q: %w", name, err):
				default:
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("%s: only loopback addresses are served", addr)
	}
	return net.Listen("tcp", addr)
}
