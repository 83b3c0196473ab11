package proxycmd

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coxswain-labs/coxswain/core/accesslog"
)

// ObserveFlags are the per-request metrics and access log flags of a command that serves traffic
// (docs/observability.md).
type ObserveFlags struct {
	RequestMetrics bool
	AccessLog      bool
	File           string
	Sample         uint64
	Query          bool
	Queue          int
}

// Register adds the flags to fs.
func (o *ObserveFlags) Register(fs *flag.FlagSet) {
	fs.BoolVar(&o.RequestMetrics, "request-metrics", true,
		"export per-route series (coxswain_proxy_requests_total, coxswain_proxy_request_duration_seconds, coxswain_proxy_upstream_errors_total, the layer-4 connection, session and byte counters) on /metrics")
	fs.BoolVar(&o.AccessLog, "access-log", true, "write one JSON line per request (--access-log=false: none)")
	fs.StringVar(&o.File, "access-log-file", "", "append the access log to this file instead of standard output")
	fs.Uint64Var(&o.Sample, "access-log-sample", 1, "log one request in N (1: every request)")
	fs.BoolVar(&o.Query, "access-log-query", false, "keep the query string (the query field); it is left out by default, since queries often carry tokens")
	fs.IntVar(&o.Queue, "access-log-queue", accesslog.DefaultQueue,
		"lines waiting for the writer before new ones are dropped (coxswain_proxy_access_log_dropped_total)")
}

// accessLogSeries count the access log's lines.
type accessLogSeries struct {
	written, dropped prometheus.Counter
}

// OpenAccessLog starts the access log the flags ask for (nil: none), with its counters on reg
// (nil: not exported). close stops it and closes its file.
func (o ObserveFlags) OpenAccessLog(stdout io.Writer, reg prometheus.Registerer) (l *accesslog.Logger, closeFn func(), err error) {
	if !o.AccessLog {
		return nil, func() {}, nil
	}
	sink, closeSink := stdout, func() {}
	if sink == nil {
		sink = os.Stdout
	}
	if o.File != "" {
		f, err := os.OpenFile(o.File, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return nil, nil, fmt.Errorf("--access-log-file: %w", err)
		}
		sink, closeSink = f, func() { _ = f.Close() }
	}
	s := accessLogSeries{
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_proxy_access_log_lines_total",
			Help: "Access log lines written to the sink."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_proxy_access_log_dropped_total",
			Help: "Access log lines dropped because the writer's queue was full (the sink is slower than the traffic)."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{s.written, s.dropped} {
			if err := reg.Register(c); err != nil {
				closeSink()
				return nil, nil, err
			}
		}
	}
	l = accesslog.New(accesslog.Options{Sink: sink, Sample: o.Sample, Query: o.Query, Queue: o.Queue,
		Dropped: s.dropped.Inc, Written: func(n int) { s.written.Add(float64(n)) }})
	return l, func() {
		l.Close(nil)
		closeSink()
	}, nil
}
