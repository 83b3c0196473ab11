package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// l4tcp is TCPRoute against nginx stream and HAProxy mode tcp: bulk throughput each way over one
// and several connections, and the connection rate (connect, echo a small payload, close).
func (e *env) l4tcp() error { return e.l4stream("L4TCP", false) }

// l4tls is the same through TLS passthrough: the client speaks TLS 1.3 to the backend, the proxy
// routes on the ClientHello's SNI and then passes the encrypted stream through.
func (e *env) l4tls() error { return e.l4stream("L4TLS", true) }

func (e *env) l4stream(bench string, useTLS bool) error {
	l, err := e.newL4(false)
	if err != nil {
		return err
	}
	defer l.stop()
	e.res.note(os.Stdout, "%s: %s", bench, l.knobs())
	var streams []int
	for _, s := range strings.Split(*l4Streams, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("-l4-streams: %w", err)
		}
		streams = append(streams, n)
	}
	type kase struct {
		mode  string
		conns int
	}
	var cases []kase
	for _, mode := range []string{"upload", "download"} {
		for _, n := range streams {
			cases = append(cases, kase{mode, n})
		}
	}
	cases = append(cases, kase{"connrate", *l4RateConns})
	for _, k := range cases {
		name := fmt.Sprintf("%s conns=%d", k.mode, k.conns)
		if k.mode == "connrate" {
			name = fmt.Sprintf("connrate conns=%d payload=%d", k.conns, *l4Payload)
		}
		err := l.rounds(bench, name, func(pe *l4Peer, run int) (map[string]float64, error) {
			addr := pe.tcp
			args := []string{"-mode", k.mode, "-conns", strconv.Itoa(k.conns), "-size", strconv.Itoa(*l4Payload)}
			if useTLS {
				addr = pe.tls
				args = append(args, "-tls", "-sni", l4SNI)
			}
			return l.measure(pe, bench, name, run, append(args, "-addr", addr))
		})
		if err != nil {
			return err
		}
		if k.mode == "connrate" {
			l.summarize(bench, name, []string{"conns_per_s", "cpu_us_per_conn", "p50_us", "p99_us", "cpu_share", "errors"})
		} else {
			l.summarize(bench, name, []string{"mb_per_s", "cpu_us_per_mb", "cpu_share", "errors"})
		}
	}
	return nil
}

// l4udp is UDPRoute against nginx stream UDP (HAProxy 2.6 has no UDP proxy): echo round trips per
// second with many client addresses (one session each) and with a few busy ones.
func (e *env) l4udp() error {
	l, err := e.newL4(true)
	if err != nil {
		return err
	}
	defer l.stop()
	e.res.note(os.Stdout, "L4UDP: HAProxy 2.6 does not proxy UDP; Coxswain against nginx stream only")
	for _, c := range strings.Split(*l4UDP, ",") {
		clients, window, ok := strings.Cut(c, "x")
		if !ok {
			return fmt.Errorf("-l4-udp: %q is not CLIENTSxWINDOW", c)
		}
		name := fmt.Sprintf("echo clients=%s window=%s payload=%d", clients, window, *l4Payload)
		err := l.rounds("L4UDP", name, func(pe *l4Peer, run int) (map[string]float64, error) {
			return l.measure(pe, "L4UDP", name, run, []string{"-mode", "udp", "-conns", clients, "-window", window,
				"-size", strconv.Itoa(*l4Payload), "-addr", pe.udp})
		})
		if err != nil {
			return err
		}
		l.summarize("L4UDP", name, []string{"rtt_per_s", "cpu_us_per_rtt", "p50_us", "p99_us", "lost", "errors"})
	}
	return nil
}

// rounds runs f for every proxy, e.opts.runs times, interleaved (each proxy is started the first
// time it is needed and stays up, idle while the others are measured).
func (l *l4Env) rounds(bench, kase string, f func(pe *l4Peer, run int) (map[string]float64, error)) error {
	for r := 1; r <= l.opts.runs; r++ {
		for _, n := range l.names {
			if l.ctx.Err() != nil {
				return l.ctx.Err()
			}
			pe := l.peers[n]
			if err := pe.start(); err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			m, err := f(pe, r)
			if err != nil {
				return fmt.Errorf("%s %s %s run %d: %w", bench, kase, n, r, err)
			}
			l.res.add(runRow{Bench: bench, Case: kase, Proxy: n, Run: r, LoadAvg: loadAvg(), Metrics: m})
		}
	}
	return nil
}

// l4Result is bench/l4load's summary line.
type l4Result struct {
	Seconds  float64 `json:"seconds"`
	Bytes    int64   `json:"bytes"`
	Ops      int64   `json:"ops"`
	Errors   int64   `json:"errors"`
	MBps     float64 `json:"mbps"`
	OpsPerS  float64 `json:"ops_per_s"`
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	Lost     int64   `json:"lost"`
	FirstErr string  `json:"first_error"`
}

// measure runs bench/l4load on the load CPU against pe and reads the proxy's CPU time when the
// measured part starts and when it ends (l4load prints a line at each).
func (l *l4Env) measure(pe *l4Peer, bench, kase string, run int, args []string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.duration+60*time.Second)
	defer cancel()
	args = append([]string{"-c", l.loadCPU, filepath.Join(filepath.Dir(l.bin.backend), "bench-l4load"),
		"-duration", l.opts.duration.String(), "-warmup", "1s"}, args...)
	cmd := exec.CommandContext(ctx, "taskset", args...)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var before, after float64
	var profile chan error
	var r l4Result
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "L4LOAD ")
		if !ok {
			continue
		}
		if line == "start" {
			before = cpuSeconds(pe.p.pid())
			if *l4CPUProfile != "" && run == 1 && pe.name == "coxswain" {
				profile = l4Profile(bench, kase, l.opts.duration)
			}
			continue
		}
		after = cpuSeconds(pe.p.pid())
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("l4load summary %q: %w", line, err)
		}
	}
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("l4load: %w: %s", err, stderr.String())
	}
	if profile != nil {
		if err := <-profile; err != nil {
			return nil, err
		}
	}
	if r.Seconds == 0 {
		return nil, errors.New("l4load printed no summary: " + stderr.String())
	}
	if r.FirstErr != "" {
		fmt.Printf("  %s %s: %d errors, first: %s\n", pe.name, kase, r.Errors, r.FirstErr)
	}
	cpu := after - before
	m := map[string]float64{"cpu_share": cpu / r.Seconds, "errors": float64(r.Errors), "seconds": r.Seconds}
	switch {
	case bench == "L4UDP":
		m["rtt_per_s"], m["lost"], m["p50_us"], m["p99_us"] = r.OpsPerS, float64(r.Lost), r.P50us, r.P99us
		m["cpu_us_per_rtt"] = perOp(cpu, r.Ops)
	case strings.HasPrefix(kase, "connrate"):
		m["conns_per_s"], m["p50_us"], m["p99_us"] = r.OpsPerS, r.P50us, r.P99us
		m["cpu_us_per_conn"] = perOp(cpu, r.Ops)
	default:
		m["mb_per_s"] = r.MBps
		m["cpu_us_per_mb"] = perOp(cpu, r.Bytes/1e6)
	}
	return m, nil
}

func perOp(cpuSeconds float64, n int64) float64 {
	if n == 0 {
		return 0
	}
	return cpuSeconds * 1e6 / float64(n)
}

// l4Profile fetches a CPU profile of the profiling coxswain build over the measured part of a run
// and writes it to -l4-cpuprofile/<bench>-<case>.pprof.
func l4Profile(bench, kase string, d time.Duration) chan error {
	done := make(chan error, 1)
	go func() {
		secs := max(1, int(d/time.Second)-1)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", hostPort(l4pprofPort), secs))
		if err != nil {
			done <- fmt.Errorf("profile: %w", err)
			return
		}
		defer func() { _ = resp.Body.Close() }()
		name := strings.ToLower(bench + "-" + strings.NewReplacer(" ", "-", "=", "").Replace(kase) + ".pprof")
		if err := os.MkdirAll(*l4CPUProfile, 0o755); err != nil {
			done <- err
			return
		}
		f, err := os.Create(filepath.Join(*l4CPUProfile, name))
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return done
}

// summarize prints and records the case's medians, with the ratio Coxswain/peer (median of the
// per-round ratios) of the first key, and adds the same ratio for the CPU-per-unit key (the
// second) to the summary rows.
func (l *l4Env) summarize(bench, kase string, keys []string) {
	first := len(l.res.Summary)
	l.res.summarize(os.Stdout, bench, kase, l.names, keys)
	per := map[string]map[int]float64{}
	for _, row := range l.res.Runs {
		if row.Bench == bench && row.Case == kase {
			if per[row.Proxy] == nil {
				per[row.Proxy] = map[int]float64{}
			}
			per[row.Proxy][row.Run] = row.Metrics[keys[1]]
		}
	}
	l.res.mu.Lock()
	defer l.res.mu.Unlock()
	for i := first; i < len(l.res.Summary); i++ {
		s := &l.res.Summary[i]
		if s.Proxy == "coxswain" || s.Ratio == nil {
			continue
		}
		var rs []float64
		for run, v := range per[s.Proxy] {
			if c, ok := per["coxswain"][run]; ok && v != 0 {
				rs = append(rs, c/v)
			}
		}
		if len(rs) > 0 {
			s.Ratio[keys[1]] = median(rs)
			fmt.Printf("  %-10s %s coxswain/peer: %.2f×\n", s.Proxy, keys[1], s.Ratio[keys[1]])
		}
	}
}
