package proxy

import (
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// threadCPU is the calling thread's CPU time so far (the caller locks its goroutine to it): on a
// loaded machine, wall-clock ns/op counts the time other processes ran too.
func threadCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDurationObserve compares one request's duration observation in client_golang's
// classic histogram (what the proxy used before durationVec) with the proxy's own cells, on
// the same buckets, for a request in the first bucket (most of a gateway's) and one past it.
// cpu-ns/op is the thread's CPU time per observation.
func BenchmarkDurationObserve(b *testing.B) {
	for _, d := range []time.Duration{300 * time.Microsecond, 70 * time.Millisecond} {
		b.Run("client_golang/"+d.String(), func(b *testing.B) {
			h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: durationBuckets[:]}, []string{"gateway", "route"})
			o := h.WithLabelValues("ns/gw", "HTTPRoute/ns/r")
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := threadCPU(b)
			for b.Loop() {
				o.Observe(d.Seconds())
			}
			b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
		})
		b.Run("own/"+d.String(), func(b *testing.B) {
			c := newDurationVec("h", "h").with("ns/gw", "HTTPRoute/ns/r")
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			start := threadCPU(b)
			for b.Loop() {
				c.observe(d)
			}
			b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
