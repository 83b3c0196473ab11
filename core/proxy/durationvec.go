package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The request duration histogram is kept by the proxy itself and turned into Prometheus series
// only when /metrics is scraped. client_golang's classic histogram pays for a consistent
// snapshot on every Observe: four atomic read-modify-writes (its hot/cold swap counter, the
// bucket, a compare-and-swap loop adding the float sum, the count) on a child two pointers away.
// Every request observes one, so here an observation is two atomic adds on one route's cells:
// its bucket's count (not cumulative: the scrape adds them up, and the count is their total)
// and the sum in integer nanoseconds. The exposition is the same as a prometheus.HistogramVec
// of the same name, help, buckets and labels (TestDurationVecExpositionMatchesClientGolang);
// what is given up is only that a scrape racing an observation may see its bucket before its
// duration in the sum (the count and buckets always agree).

// durationBoundsNanos are durationBuckets in nanoseconds, compared without converting each
// request's duration to float seconds.
var durationBoundsNanos = func() [len(durationBuckets)]time.Duration {
	var b [len(durationBuckets)]time.Duration
	for i, s := range durationBuckets {
		b[i] = time.Duration(s * float64(time.Second))
	}
	return b
}()

// durationCells are one (gateway, route) label set's histogram. Made by the first request that
// needs them (lazyseries.go), so a route without traffic has none.
type durationCells struct {
	buckets  [len(durationBuckets) + 1]atomic.Uint64 // observations per bucket; the last is +Inf
	sumNanos atomic.Uint64
}

// observe counts one request that took d. The bucket is found from the smallest boundary up:
// most requests through a gateway end within its first buckets.
func (c *durationCells) observe(d time.Duration) {
	d = max(d, 0)
	i := 0
	for i < len(durationBoundsNanos) && d > durationBoundsNanos[i] {
		i++
	}
	c.buckets[i].Add(1)
	c.sumNanos.Add(uint64(d))
}

// durationVec is the coxswain_proxy_request_duration_seconds family: the cells of each label
// set, made and deleted as a HistogramVec's children are (with, remove), exported at scrape.
type durationVec struct {
	desc *prometheus.Desc

	mu    sync.Mutex
	cells map[[2]string]*durationCells // by gateway, route
}

var _ prometheus.Collector = (*durationVec)(nil)

func newDurationVec(name, help string) *durationVec {
	return &durationVec{desc: prometheus.NewDesc(name, help, []string{"gateway", "route"}, nil),
		cells: map[[2]string]*durationCells{}}
}

// with returns the cells of (gateway, route), made on first use; every caller gets the same.
func (v *durationVec) with(gateway, route string) *durationCells {
	v.mu.Lock()
	defer v.mu.Unlock()
	k := [2]string{gateway, route}
	c := v.cells[k]
	if c == nil {
		c = new(durationCells)
		v.cells[k] = c
	}
	return c
}

// remove deletes the series of (gateway, route).
func (v *durationVec) remove(gateway, route string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.cells, [2]string{gateway, route})
}

// Describe implements prometheus.Collector.
func (v *durationVec) Describe(ch chan<- *prometheus.Desc) { ch <- v.desc }

// Collect implements prometheus.Collector: one histogram per label set, the buckets made
// cumulative. The label sets are copied under the lock and read outside it, so a scrape of many
// routes does not hold up a table build making or deleting one.
func (v *durationVec) Collect(ch chan<- prometheus.Metric) {
	type labelled struct {
		labels [2]string
		cells  *durationCells
	}
	v.mu.Lock()
	sets := make([]labelled, 0, len(v.cells))
	for k, c := range v.cells {
		sets = append(sets, labelled{k, c})
	}
	v.mu.Unlock()
	for _, s := range sets {
		var cumulative uint64
		buckets := make(map[float64]uint64, len(durationBuckets))
		for i, le := range durationBuckets {
			cumulative += s.cells.buckets[i].Load()
			buckets[le] = cumulative
		}
		count := cumulative + s.cells.buckets[len(durationBuckets)].Load()
		sum := float64(s.cells.sumNanos.Load()) / float64(time.Second)
		ch <- prometheus.MustNewConstHistogram(v.desc, count, sum, buckets, s.labels[0], s.labels[1])
	}
}
