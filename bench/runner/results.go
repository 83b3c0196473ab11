package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// results is what a session writes to bench/results/<stamp>.json: every run, and per case the
// medians and the ratios of Coxswain to each peer.
type results struct {
	mu      sync.Mutex
	Meta    meta         `json:"meta"`
	Runs    []runRow     `json:"runs"`
	Summary []summaryRow `json:"summary"`
}

type meta struct {
	Started   time.Time         `json:"started"`
	Finished  time.Time         `json:"finished"`
	Host      string            `json:"host"`
	CPUs      int               `json:"cpus"`
	CPUModel  string            `json:"cpu_model"`
	Kernel    string            `json:"kernel"`
	Versions  map[string]string `json:"versions"`
	Options   map[string]string `json:"options"`
	LoadStart float64           `json:"loadavg_start"`
	LoadEnd   float64           `json:"loadavg_end"`
	Notes     []string          `json:"notes,omitempty"`
}

type runRow struct {
	Bench   string             `json:"bench"`
	Case    string             `json:"case"`
	Proxy   string             `json:"proxy"`
	Run     int                `json:"run"`
	LoadAvg float64            `json:"loadavg"`
	Metrics map[string]float64 `json:"metrics"`
}

type summaryRow struct {
	Bench  string             `json:"bench"`
	Case   string             `json:"case"`
	Proxy  string             `json:"proxy"`
	Runs   int                `json:"runs"`
	Median map[string]float64 `json:"median"`
	// Ratio is Coxswain's value over this peer's for the case's key metric, the median of the ratios
	// taken round by round (each round runs every proxy back to back).
	Ratio map[string]float64 `json:"ratio_coxswain_over_peer,omitempty"`
}

func (r *results) add(row runRow) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Runs = append(r.Runs, row)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summarize computes the summary rows of one case from its runs and prints them as a table.
// keys are the metrics to show, the first being the one ratios are taken on.
func (r *results) summarize(w io.Writer, bench, kase string, proxies []string, keys []string) {
	per := map[string][]runRow{}
	for _, row := range r.Runs {
		if row.Bench == bench && row.Case == kase {
			per[row.Proxy] = append(per[row.Proxy], row)
		}
	}
	fmt.Fprintf(w, "\n%s %s\n", bench, kase)
	fmt.Fprintf(w, "  %-10s", "proxy")
	for _, k := range keys {
		fmt.Fprintf(w, " %14s", k)
	}
	fmt.Fprintf(w, " %s\n", "coxswain/peer ("+keys[0]+")")
	cox := per["coxswain"]
	for _, p := range proxies {
		rows := per[p]
		if len(rows) == 0 {
			continue
		}
		s := summaryRow{Bench: bench, Case: kase, Proxy: p, Runs: len(rows), Median: map[string]float64{}}
		for k := range rows[0].Metrics {
			var v []float64
			for _, row := range rows {
				v = append(v, row.Metrics[k])
			}
			s.Median[k] = median(v)
		}
		ratio := ""
		if p != "coxswain" && len(cox) > 0 {
			var rs []float64
			for _, row := range rows {
				for _, c := range cox {
					if c.Run == row.Run && row.Metrics[keys[0]] != 0 {
						rs = append(rs, c.Metrics[keys[0]]/row.Metrics[keys[0]])
					}
				}
			}
			if len(rs) > 0 {
				s.Ratio = map[string]float64{keys[0]: median(rs)}
				ratio = fmt.Sprintf("%.2f×", s.Ratio[keys[0]])
			}
		}
		fmt.Fprintf(w, "  %-10s", p)
		for _, k := range keys {
			fmt.Fprintf(w, " %14s", fmtVal(s.Median[k]))
		}
		fmt.Fprintf(w, " %s\n", ratio)
		r.mu.Lock()
		r.Summary = append(r.Summary, s)
		r.mu.Unlock()
	}
}

func fmtVal(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e12:
		return fmt.Sprintf("%d", int64(v))
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func (r *results) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.Meta.Started.UTC().Format("20060102T150405Z")+".json")
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", err
	}
	// A stable name for the latest session too.
	return path, os.WriteFile(filepath.Join(dir, "latest.json"), b, 0o644)
}

// note records a remark in the results and prints it.
func (r *results) note(w io.Writer, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	fmt.Fprintln(w, "  note: "+s)
	r.mu.Lock()
	r.Meta.Notes = append(r.Meta.Notes, s)
	r.mu.Unlock()
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return ""
}
