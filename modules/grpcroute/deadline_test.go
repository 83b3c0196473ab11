package grpcroute_test

import (
	"bytes"
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

func TestParseTimeout(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1S", time.Second, true},
		{"100m", 100 * time.Millisecond, true},
		{"0n", 0, true},
		{"99999999u", 99999999 * time.Microsecond, true},
		{"3H", 3 * time.Hour, true},
		{"2M", 2 * time.Minute, true},
		{"99999999H", math.MaxInt64, true},
		{"", 0, false},
		{"S", 0, false},
		{"123456789S", 0, false},
		{"1s", 0, false},
		{"-1S", 0, false},
		{"1.5S", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := grpcroute.ParseTimeout(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseTimeoutAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _, _ = grpcroute.ParseTimeout("250m") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// TestClientDeadlineAtProxy sends calls whose only deadline is the grpc-timeout header: the
// client itself never gives up, so whatever ends the call is the proxy's doing, and it must be
// DEADLINE_EXCEEDED. A grpc-go backend gives up at the same deadline and resets the stream with
// CANCEL; before the proxy bounded calls by grpc-timeout, that reset reached the client as
// UNAVAILABLE ("Bad Gateway"), which is how TestDeadline flaked when its client's own timer lost
// the race. A backend that ignores deadlines would have held the call forever.
func TestClientDeadlineAtProxy(t *testing.T) {
	cases := []struct {
		name    string
		cluster func(t *testing.T) *irv1.Cluster
	}{
		{"backend resets at the deadline", func(t *testing.T) *irv1.Cluster {
			return h2cCluster("grpc", grpctest.Start(t, "a"))
		}},
		{"backend ignores the deadline", func(t *testing.T) *irv1.Cluster {
			return &irv1.Cluster{Name: "grpc", Protocol: irv1.Cluster_H2C,
				Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: startSilentBackend(t), Weight: 1}}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addrs := startProxy(t, []*irv1.Listener{plainListener("l", server("", vhost("",
				grpcRoute("all", grpcroute.Match{}, backend("grpc", 1)))))}, []*irv1.Cluster{tc.cluster(t)})
			for range 5 {
				if got := rawCall(t, addrs[0], "100m"); got != grpcroute.CodeDeadlineExceeded {
					t.Fatalf("grpc-status %d, want %d (DEADLINE_EXCEEDED)", got, grpcroute.CodeDeadlineExceeded)
				}
			}
		})
	}
}

// rawCall makes a unary call of the test service with an HTTP/2 client that has no deadline of
// its own, only the grpc-timeout header, and returns the grpc-status it ends with.
func rawCall(t *testing.T, addr, timeout string) grpcroute.Code {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: &p}}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // the test's bound only
	defer cancel()
	// An empty SimpleRequest: uncompressed, length 0.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/"+grpctest.Service+"/UnaryCall",
		bytes.NewReader(make([]byte, 5)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	req.Header.Set("Grpc-Timeout", timeout)
	req.Header.Set(grpctest.WaitKey, "1")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Fatalf("body: %v", err)
	}
	s := res.Header.Get("Grpc-Status")
	if s == "" {
		s = res.Trailer.Get("Grpc-Status")
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("HTTP %d, grpc-status %q, header %v, trailer %v", res.StatusCode, s, res.Header, res.Trailer)
	}
	return grpcroute.Code(n)
}

// startSilentBackend is a cleartext HTTP/2 server that never answers a call until the proxy
// cancels it.
func startSilentBackend(t *testing.T) uint32 {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return uint32(ln.Addr().(*net.TCPAddr).Port)
}
