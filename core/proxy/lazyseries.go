package proxy

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Lazily made request series. A route's label sets (its Gateway, route object and backends) are
// known at table build, but most of the series under them — six status classes per backend, the
// upstream error reasons — may never see a request; making them all up front would export a
// zero series for each, which a table of 10,000 routes multiplies into hundreds of thousands.
// So a label set's children are made by the first request that needs one (WithLabelValues, a
// one-time allocation) and kept in an atomic pointer: every later request only loads it and
// increments. The sets are shared by every table that serves the route (by label set, under
// requestSeries.mu), so a new snapshot keeps the children already made, and the series a set made
// are deleted when the last table holding it closes.

// counterRef holds a made child.
type counterRef struct{ c prometheus.Counter }

// lazyCounter is one child of a label set, nil until first used.
type lazyCounter struct{ p atomic.Pointer[counterRef] }

// get returns the child, making it with vec and the label values on first use.
func (l *lazyCounter) get(vec *prometheus.CounterVec, gateway, route, backend, last string) prometheus.Counter {
	if r := l.p.Load(); r != nil {
		return r.c
	}
	return l.make(vec, gateway, route, backend, last)
}

// make is get's slow path: two requests racing here get the same child from the vector.
func (l *lazyCounter) make(vec *prometheus.CounterVec, gateway, route, backend, last string) prometheus.Counter {
	r := &counterRef{c: vec.WithLabelValues(gateway, route, backend, last)}
	if !l.p.CompareAndSwap(nil, r) {
		r = l.p.Load()
	}
	return r.c
}

// made reports whether the child exists (to delete it).
func (l *lazyCounter) made() bool { return l.p.Load() != nil }

// backendSeries are the series of one (gateway, route, backend) label set.
type backendSeries struct {
	key                     string
	gateway, route, backend string
	holders                 int // tables holding the set (under requestSeries.mu)
	codes                   [numClasses]lazyCounter
	upstream                [numUpstreamErrors]lazyCounter
}

// count counts one answered request of class.
func (b *backendSeries) count(s *requestSeries, class codeClass) {
	b.codes[class].get(s.requests, b.gateway, b.route, b.backend, classLabels[class]).Inc()
}

// upstreamError counts one failed exchange with an endpoint of the backend.
func (b *backendSeries) upstreamError(s *requestSeries, e upstreamError) {
	b.upstream[e].get(s.upstreamErrors, b.gateway, b.route, b.backend, upstreamErrorLabels[e]).Inc()
}

// deleteMade deletes the children the set made (under requestSeries.mu, once no table holds it).
func (b *backendSeries) deleteMade(s *requestSeries) {
	for i := range b.codes {
		if b.codes[i].made() {
			s.requests.DeleteLabelValues(b.gateway, b.route, b.backend, classLabels[i])
		}
	}
	for i := range b.upstream {
		if b.upstream[i].made() {
			s.upstreamErrors.DeleteLabelValues(b.gateway, b.route, b.backend, upstreamErrorLabels[i])
		}
	}
}

// observerRef holds a made histogram child.
type observerRef struct{ o prometheus.Observer }

// routeSeries is the duration histogram of one (gateway, route) label set.
type routeSeries struct {
	key            string
	gateway, route string
	holders        int
	duration       atomic.Pointer[observerRef]
}

// observe observes one request's duration in seconds.
func (r *routeSeries) observe(s *requestSeries, seconds float64) {
	o := r.duration.Load()
	if o == nil {
		o = &observerRef{o: s.duration.WithLabelValues(r.gateway, r.route)}
		if !r.duration.CompareAndSwap(nil, o) {
			o = r.duration.Load()
		}
	}
	o.o.Observe(seconds)
}
