package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// h3 is HTTP/3 downstream, HTTP/1.1 upstream: Coxswain's HTTPS listener with
// ClientTrafficPolicy http3 against Caddy's HTTPS site with protocol h3, both on the same
// certificate, driven by bench/h3load (quic-go's http3 client) over 16 QUIC connections with 1
// and with 10 requests in flight on each. Only the peers that serve HTTP/3 take part (Caddy).
func (e *env) h3() error {
	var names []string
	for _, n := range e.order() {
		if n == "coxswain" || n == "caddy" {
			names = append(names, n)
		}
	}
	if _, err := e.startPeers(names...); err != nil {
		return err
	}
	for _, m := range []int{1, 10} {
		kase := fmt.Sprintf("h3 c=16 m=%d", m)
		err := e.rounds("H3", kase, names, func(pe *peer) (map[string]float64, error) {
			url := pe.https + "/12"
			if _, err := e.h3load(e.ctx, url, 16, m, time.Second); err != nil { // warm-up
				return nil, err
			}
			var r h3Result
			_, cpu, err := e.measured(pe, func() (int64, error) {
				var err error
				r, err = e.h3load(e.ctx, url, 16, m, e.opts.duration)
				return r.Done, err
			})
			if err != nil {
				return nil, err
			}
			return map[string]float64{"rps": r.RPS, "cpu_us_per_req": cpu, "p99_us": r.P99US, "failures": float64(r.Failures)}, nil
		})
		if err != nil {
			return err
		}
		e.res.summarize(os.Stdout, "H3", kase, names, []string{"rps", "cpu_us_per_req", "p99_us", "failures"})
	}
	return nil
}

// h3Result is bench/h3load's summary line.
type h3Result struct {
	Done       int64   `json:"done"`
	Failures   int64   `json:"failures"`
	RPS        float64 `json:"rps"`
	P50US      float64 `json:"p50_us"`
	P99US      float64 `json:"p99_us"`
	FirstError string  `json:"first_error"`
}

// h3load runs bench/h3load on the load CPU.
func (e *env) h3load(ctx context.Context, url string, conns, streams int, d time.Duration) (h3Result, error) {
	bin := filepath.Join(filepath.Dir(e.bin.backend), "bench-h3load")
	out, err := run(ctx, d+30*time.Second, "taskset", "-c", e.load.cpu, bin, "-url", url, "-insecure",
		"-conns", strconv.Itoa(conns), "-streams", strconv.Itoa(streams), "-duration", d.String())
	if err != nil {
		return h3Result{}, fmt.Errorf("h3load: %w: %s", err, out)
	}
	// quic-go may warn on stderr (socket buffer sizes); the summary is the last JSON line.
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var r h3Result
	if err := json.Unmarshal(lines[len(lines)-1], &r); err != nil {
		return h3Result{}, fmt.Errorf("h3load output not understood: %s", out)
	}
	return r, nil
}
