// Command l4load is the load generator of the layer-4 benchmarks (bench/runner l4tcp, l4tls,
// l4udp), speaking bench/l4backend's protocol through a proxy:
//
//	-mode upload    -conns N: N connections each write 256 KiB chunks for the duration, then
//	                half-close and wait for the backend's byte count (throughput, client → backend)
//	-mode download  -conns N: N connections each read what the backend streams for the duration
//	                (throughput, backend → client)
//	-mode connrate  -conns N: N workers each loop connect, (TLS handshake,) send -size bytes, read
//	                the echo, close (connections per second)
//	-mode udp       -conns N: N UDP sockets (N client addresses, so N proxy sessions), each with
//	                -window datagrams of -size bytes in flight, echoed by the backend (round trips
//	                per second)
//
// With -tls every stream is TLS 1.3 (X25519, certificate not verified: the benchmark measures the
// proxy, not the client's chain check) with -sni as the server name; the proxy passes it through
// and the backend terminates it.
//
// Each run does a warm-up of -warmup with the same workload, prints "L4LOAD start" when the
// measured part begins (the runner reads the proxy's CPU time then), and "L4LOAD {json}" when it
// ends. Errors (failed dials, handshakes, reads, short or wrong echoes, byte counts that do not
// match, UDP datagrams not answered within 200 ms) are counted, not fatal.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	mode     string
	addr     string
	conns    int
	duration time.Duration
	warmup   time.Duration
	size     int
	window   int
	tls      *tls.Config
}

// result is what one measured run prints.
type result struct {
	Mode     string  `json:"mode"`
	Conns    int     `json:"conns"`
	Seconds  float64 `json:"seconds"`
	Bytes    int64   `json:"bytes"`
	Ops      int64   `json:"ops"` // connections (connrate) or round trips (udp)
	Errors   int64   `json:"errors"`
	MBps     float64 `json:"mbps"` // MB/s (10^6 bytes)
	OpsPerS  float64 `json:"ops_per_s"`
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	Lost     int64   `json:"lost"` // UDP datagrams not answered in time
	Warmup   float64 `json:"warmup_seconds"`
	FirstErr string  `json:"first_error,omitempty"`
}

func main() {
	var c config
	flag.StringVar(&c.mode, "mode", "connrate", "upload, download, connrate or udp")
	flag.StringVar(&c.addr, "addr", "127.0.0.1:18250", "the proxy's address")
	flag.IntVar(&c.conns, "conns", 1, "concurrent connections (UDP: client sockets)")
	flag.DurationVar(&c.duration, "duration", 5*time.Second, "measured duration")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "warm-up before the measured run (same workload)")
	flag.IntVar(&c.size, "size", 64, "payload bytes per echo (connrate, udp)")
	flag.IntVar(&c.window, "window", 1, "UDP datagrams in flight per client socket")
	useTLS := flag.Bool("tls", false, "TLS 1.3 to the backend through the proxy")
	sni := flag.String("sni", "bench.example.com", "TLS server name")
	flag.Parse()
	if *useTLS {
		c.tls = &tls.Config{ServerName: *sni, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
			CurvePreferences: []tls.CurveID{tls.X25519}}
	}
	run := map[string]func(context.Context, *config, *stats){
		"upload": upload, "download": download, "connrate": connrate, "udp": udpLoad,
	}[c.mode]
	if run == nil {
		fmt.Fprintln(os.Stderr, "l4load: unknown -mode", c.mode)
		os.Exit(2)
	}
	if c.warmup > 0 {
		phase(&c, c.warmup, run)
	}
	fmt.Println("L4LOAD start")
	st, secs := phase(&c, c.duration, run)
	r := st.result(&c, secs)
	r.Warmup = c.warmup.Seconds()
	b, _ := json.Marshal(r)
	fmt.Printf("L4LOAD %s\n", b)
}

// phase runs the workload for d and returns its counters and its real length in seconds (for
// uploads, until the last byte count came back).
func phase(c *config, d time.Duration, run func(context.Context, *config, *stats)) (*stats, float64) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	st := &stats{}
	start := time.Now()
	run(ctx, c, st)
	end := time.Now()
	if st.end.Load() != 0 {
		end = time.Unix(0, st.end.Load())
	}
	return st, end.Sub(start).Seconds()
}

// stats are the counters of one phase, shared by its workers.
type stats struct {
	bytes, ops, errors, lost atomic.Int64
	end                      atomic.Int64 // unix ns when the last worker finished (uploads)
	mu                       sync.Mutex
	lat                      []time.Duration
	firstErr                 string
}

func (s *stats) fail(err error) {
	s.errors.Add(1)
	s.mu.Lock()
	if s.firstErr == "" {
		s.firstErr = err.Error()
	}
	s.mu.Unlock()
}

func (s *stats) addLatencies(l []time.Duration) {
	s.mu.Lock()
	s.lat = append(s.lat, l...)
	s.mu.Unlock()
}

// finished records when a worker ended, keeping the latest.
func (s *stats) finished(t time.Time) {
	for {
		old := s.end.Load()
		if t.UnixNano() <= old || s.end.CompareAndSwap(old, t.UnixNano()) {
			return
		}
	}
}

func (s *stats) result(c *config, secs float64) result {
	r := result{Mode: c.mode, Conns: c.conns, Seconds: secs, Bytes: s.bytes.Load(), Ops: s.ops.Load(),
		Errors: s.errors.Load(), Lost: s.lost.Load(), FirstErr: s.firstErr}
	if secs > 0 {
		r.MBps = float64(r.Bytes) / secs / 1e6
		r.OpsPerS = float64(r.Ops) / secs
	}
	if len(s.lat) > 0 {
		sort.Slice(s.lat, func(i, j int) bool { return s.lat[i] < s.lat[j] })
		at := func(p float64) float64 {
			i := min(max(int(float64(len(s.lat))*p/100+0.5)-1, 0), len(s.lat)-1)
			return float64(s.lat[i].Nanoseconds()) / 1e3
		}
		r.P50us, r.P99us = at(50), at(99)
	}
	return r
}

// dial opens one stream to the proxy, with TLS when configured (handshake included).
func dial(ctx context.Context, c *config) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(context.Background(), "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	if c.tls == nil {
		return conn, nil
	}
	tc := tls.Client(conn, c.tls)
	hctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("handshake: %w", err)
	}
	return tc, nil
}

// parallel runs f in c.conns goroutines and waits for them.
func parallel(ctx context.Context, c *config, st *stats, f func(context.Context, *config, *stats)) {
	var wg sync.WaitGroup
	for range c.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx, c, st)
		}()
	}
	wg.Wait()
}
