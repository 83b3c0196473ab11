// Command client calls grpc.health.v1.Health through the proxy and prints which backend answered
// and what metadata it received (package healthecho).
//
//	go run ./examples/grpc/client                          # Check
//	go run ./examples/grpc/client -H 'x-canary: true'      # Check with metadata
//	go run ./examples/grpc/client -method list -n 10       # List ten times, then a tally
//
// A failed call prints its gRPC status code and message and exits 1.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/examples/grpc/healthecho"
)

// headers is a repeatable -H "key: value" flag.
type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	addr := flag.String("addr", "127.0.0.1:9080", "the proxy's gRPC listener")
	method := flag.String("method", "check", "check, list or watch")
	n := flag.Int("n", 1, "calls to make; more than one prints a tally of the backends")
	var hs headers
	flag.Var(&hs, "H", `request metadata "key: value" (repeatable)`)
	flag.Parse()
	if err := run(*addr, *method, *n, hs); err != nil {
		if st, ok := status.FromError(err); ok {
			fmt.Printf("error: code=%s message=%q\n", st.Code(), st.Message())
		} else {
			fmt.Printf("error: %v\n", err)
		}
		os.Exit(1)
	}
}

func run(addr, method string, n int, hs headers) error {
	md := metadata.MD{}
	for _, h := range hs {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			return fmt.Errorf("-H %q: want \"key: value\"", h)
		}
		md.Append(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	conn, err := healthecho.Dial(addr)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	tally := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := healthecho.Call(ctx, conn, method, md)
		cancel()
		if err != nil {
			return err
		}
		if n == 1 {
			fmt.Printf("%s: %s\n", method, res)
		}
		tally[res.Backend]++
	}
	if n > 1 {
		fmt.Printf("%s x%d: %s\n", method, n, formatTally(tally))
	}
	return nil
}

func formatTally(tally map[string]int) string {
	names := make([]string, 0, len(tally))
	for name := range tally {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s=%d", name, tally[name])
	}
	return strings.Join(parts, " ")
}
