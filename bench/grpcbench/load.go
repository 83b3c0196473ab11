package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// summary is what one load run prints, after "GRPCJSON ", on one line. Latencies are in µs.
type summary struct {
	Calls       int64            `json:"calls"`
	Failures    int64            `json:"failures"`
	Codes       map[string]int64 `json:"codes,omitempty"`
	DurationUS  int64            `json:"duration_us"`
	RPS         float64          `json:"rps"`
	P50         float64          `json:"p50"`
	P90         float64          `json:"p90"`
	P99         float64          `json:"p99"`
	P999        float64          `json:"p999"`
	Max         float64          `json:"max"`
	Conns       int              `json:"conns"`
	Concurrency int              `json:"concurrency"`
}

type loadOpts struct {
	target      string
	authority   string
	conns       int
	concurrency int
	duration    time.Duration
	warmup      time.Duration
	reqSize     int
	respSize    int
	timeout     time.Duration
}

// load keeps opts.concurrency unary calls in flight over opts.conns connections (call i uses
// connection i mod conns) for the warm-up and then the measured duration, and prints the summary
// of the measured part.
func load(args []string) error {
	var o loadOpts
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	fs.StringVar(&o.target, "target", "127.0.0.1:18360", "host:port to call (cleartext HTTP/2)")
	fs.StringVar(&o.authority, "authority", "", ":authority to send (default: the target)")
	fs.IntVar(&o.conns, "conns", 1, "connections")
	fs.IntVar(&o.concurrency, "concurrency", 1, "calls in flight (closed loop)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured time before")
	fs.IntVar(&o.reqSize, "req-size", 0, "request payload bytes")
	fs.IntVar(&o.respSize, "resp-size", 0, "response payload bytes")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Second, "per-call deadline (grpc-timeout)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.conns < 1 || o.concurrency < 1 {
		return errors.New("conns and concurrency must be at least 1")
	}
	s, err := runLoad(context.Background(), o)
	if err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	fmt.Printf("GRPCJSON %s\n", b)
	return nil
}

func runLoad(ctx context.Context, o loadOpts) (summary, error) {
	clients := make([]testgrpc.TestServiceClient, o.conns)
	for i := range clients {
		opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		if o.authority != "" {
			opts = append(opts, grpc.WithAuthority(o.authority))
		}
		cc, err := grpc.NewClient("passthrough:///"+o.target, opts...)
		if err != nil {
			return summary{}, err
		}
		defer func() { _ = cc.Close() }()
		clients[i] = testgrpc.NewTestServiceClient(cc)
	}
	req := &testgrpc.SimpleRequest{ResponseSize: int32(o.respSize)}
	if o.reqSize > 0 {
		req.Payload = &testgrpc.Payload{Body: make([]byte, o.reqSize)}
	}
	// Every connection answers once before the clock starts.
	for _, c := range clients {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.UnaryCall(cctx, req, grpc.WaitForReady(true))
		cancel()
		if err != nil {
			return summary{}, fmt.Errorf("first call: %w", err)
		}
	}

	var measuring, stop atomic.Bool
	var mu sync.Mutex
	var lat []time.Duration
	codes := map[string]int64{}
	var wg sync.WaitGroup
	for i := range o.concurrency {
		wg.Add(1)
		go func(c testgrpc.TestServiceClient) {
			defer wg.Done()
			mine := make([]time.Duration, 0, 1<<16)
			myCodes := map[string]int64{}
			for !stop.Load() {
				t0 := time.Now()
				cctx, cancel := context.WithTimeout(ctx, o.timeout)
				_, err := c.UnaryCall(cctx, req)
				cancel()
				if !measuring.Load() {
					continue
				}
				if err != nil {
					myCodes[status.Code(err).String()]++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			for k, v := range myCodes {
				codes[k] += v
			}
			mu.Unlock()
		}(clients[i%o.conns])
	}
	time.Sleep(o.warmup)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(o.duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()

	slices.Sort(lat)
	s := summary{Calls: int64(len(lat)), DurationUS: elapsed.Microseconds(), Conns: o.conns, Concurrency: o.concurrency}
	for _, v := range codes {
		s.Failures += v
	}
	if len(codes) > 0 {
		s.Codes = codes
	}
	s.RPS = float64(s.Calls) / elapsed.Seconds()
	s.P50, s.P90, s.P99, s.P999, s.Max = pct(lat, 50), pct(lat, 90), pct(lat, 99), pct(lat, 99.9), pct(lat, 100)
	return s, nil
}

// pct is the p-th percentile of sorted durations (nearest rank), in µs.
func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return float64(sorted[i].Nanoseconds()) / 1e3
}
