package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// wrkScript makes wrk print its summary as one JSON line (latencies in µs), so the runner reads
// percentiles up to p99.9 and every error counter without scraping the human report. "status"
// counts responses with a status of 400 or more.
const wrkScript = `done = function(summary, latency, requests)
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50":%d,"p90":%d,"p99":%d,"p999":%d,"mean":%.1f,"max":%d}\n',
    summary.requests, summary.duration, summary.bytes, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout, latency:percentile(50),
    latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.mean, latency.max))
end
`

// wrkPaced is wrkScript plus a per-connection pause that holds wrk near a target rate (B7: the
// load must stay below saturation). wrk sleeps delay() ms before each request on a connection.
const wrkPaced = wrkScript + `
local pause_ms = tonumber(os.getenv("WRK_PAUSE_MS") or "0")
delay = function() return pause_ms end
`

// wrkResult is one wrk run.
type wrkResult struct {
	Requests   int64   `json:"requests"`
	DurationUS int64   `json:"duration_us"`
	Bytes      int64   `json:"bytes"`
	Connect    int64   `json:"connect"`
	Read       int64   `json:"read"`
	Write      int64   `json:"write"`
	Status     int64   `json:"status"`
	Timeout    int64   `json:"timeout"`
	P50        float64 `json:"p50"`
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	P999       float64 `json:"p999"`
	Mean       float64 `json:"mean"`
	Max        float64 `json:"max"`
}

func (w wrkResult) rps() float64 {
	if w.DurationUS == 0 {
		return 0
	}
	return float64(w.Requests) / (float64(w.DurationUS) / 1e6)
}

// errors counts socket errors of every kind; non-2xx responses are counted apart (status).
func (w wrkResult) errors() int64 { return w.Connect + w.Read + w.Write + w.Timeout }

type loader struct {
	cpu     string // CPU set of the load generator
	tmp     string
	script  string
	paced   string
	timeout string
}

func newLoader(cpu, tmp string) (*loader, error) {
	script := filepath.Join(tmp, "summary.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o644); err != nil {
		return nil, err
	}
	paced := filepath.Join(tmp, "paced.lua")
	if err := os.WriteFile(paced, []byte(wrkPaced), 0o644); err != nil {
		return nil, err
	}
	return &loader{cpu: cpu, tmp: tmp, script: script, paced: paced, timeout: "2s"}, nil
}

// wrk runs wrk -t1 with conns connections for d against url.
func (l *loader) wrk(ctx context.Context, url string, conns int, d time.Duration, headers ...string) (wrkResult, error) {
	return l.wrkPaced(ctx, url, conns, d, 0, headers...)
}

// wrkPaced is wrk with every connection pausing pauseMS between requests (0: closed loop).
func (l *loader) wrkPaced(ctx context.Context, url string, conns int, d time.Duration, pauseMS int, headers ...string) (wrkResult, error) {
	script := l.script
	if pauseMS > 0 {
		script = l.paced
	}
	args := []string{"-c", l.cpu, "env", "WRK_PAUSE_MS=" + strconv.Itoa(pauseMS),
		"wrk", "-t1", "-c", strconv.Itoa(conns), "-d", secs(d), "--timeout", l.timeout, "-s", script}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	args = append(args, url)
	out, err := run(ctx, d+30*time.Second, "taskset", args...)
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w: %s", err, out)
	}
	i := bytes.LastIndex(out, []byte("WRKJSON "))
	if i < 0 {
		return wrkResult{}, fmt.Errorf("wrk printed no summary: %s", out)
	}
	line, _, _ := bytes.Cut(out[i+len("WRKJSON "):], []byte("\n"))
	var r wrkResult
	if err := json.Unmarshal(line, &r); err != nil {
		return wrkResult{}, fmt.Errorf("wrk summary %q: %w", line, err)
	}
	return r, nil
}

// h2Result is one h2load run: its counters and, when a log file was kept, latency percentiles
// (µs) computed from every request.
type h2Result struct {
	Done, Succeeded, Failed, Errored, Timeout int64
	S2xx, S3xx, S4xx, S5xx                    int64
	RPS                                       float64
	P50, P99, P999, Max                       float64
	Samples                                   int
}

func (r h2Result) failures() int64 { return r.Failed + r.Errored + r.Timeout + r.S4xx + r.S5xx }

var (
	reReqs   = regexp.MustCompile(`requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	reStatus = regexp.MustCompile(`status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	reRPS    = regexp.MustCompile(`finished in [^,]+, ([\d.]+) req/s`)
)

// h2opts describe one h2load run.
type h2opts struct {
	url      string
	h1       bool
	clients  int
	streams  int     // -m; 0 means 1
	rate     float64 // total requests/s over all clients (--rps per client); 0 means closed loop
	duration time.Duration
	requests int  // -n, when duration is 0
	latency  bool // keep a per-request log and compute percentiles
	extra    []string
}

func (l *loader) h2load(ctx context.Context, o h2opts) (h2Result, error) {
	args := []string{"-c", l.cpu, "h2load", "-c", strconv.Itoa(o.clients)}
	if o.h1 {
		args = append(args, "--h1")
	}
	if o.streams > 0 {
		args = append(args, "-m", strconv.Itoa(o.streams))
	}
	if o.rate > 0 {
		per := o.rate / float64(o.clients)
		args = append(args, "--rps", strconv.FormatFloat(per, 'f', 2, 64))
	}
	limit := 5 * time.Minute
	if o.duration > 0 {
		args = append(args, "-D", secs(o.duration), "--warm-up-time", "1")
		limit = o.duration + 30*time.Second
	} else {
		args = append(args, "-n", strconv.Itoa(o.requests))
	}
	logFile := filepath.Join(l.tmp, "h2load.log")
	if o.latency {
		_ = os.Remove(logFile)
		args = append(args, "--log-file", logFile)
	}
	args = append(args, o.extra...)
	args = append(args, o.url)
	out, err := run(ctx, limit, "taskset", args...)
	if err != nil {
		return h2Result{}, fmt.Errorf("h2load: %w: %s", err, out)
	}
	var r h2Result
	m := reReqs.FindSubmatch(out)
	s := reStatus.FindSubmatch(out)
	if m == nil || s == nil {
		return h2Result{}, fmt.Errorf("h2load output not understood: %s", out)
	}
	r.Done, r.Succeeded, r.Failed, r.Errored, r.Timeout = atoi(m[3]), atoi(m[4]), atoi(m[5]), atoi(m[6]), atoi(m[7])
	r.S2xx, r.S3xx, r.S4xx, r.S5xx = atoi(s[1]), atoi(s[2]), atoi(s[3]), atoi(s[4])
	if rm := reRPS.FindSubmatch(out); rm != nil {
		r.RPS, _ = strconv.ParseFloat(string(rm[1]), 64)
	}
	if o.latency {
		lat, err := readLatencies(logFile)
		if err != nil {
			return r, err
		}
		r.Samples = len(lat)
		r.P50, r.P99, r.P999, r.Max = pct(lat, 50), pct(lat, 99), pct(lat, 99.9), pct(lat, 100)
	}
	return r, nil
}

// readLatencies reads the third column (µs until the end of the response) of an h2load log.
func readLatencies(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			continue
		}
		v, err := strconv.ParseFloat(fs[2], 64)
		if err == nil {
			out = append(out, v)
		}
	}
	sort.Float64s(out)
	return out, sc.Err()
}

// pct is the p-th percentile of sorted values (nearest rank).
func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	i = min(max(i, 0), len(sorted)-1)
	return sorted[i]
}

func atoi(b []byte) int64 {
	n, _ := strconv.ParseInt(string(b), 10, 64)
	return n
}

func secs(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))) + "s"
}

// run runs a bounded command and returns its combined output.
func run(ctx context.Context, limit time.Duration, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	return cmd.CombinedOutput()
}
