package proxy

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Lazily made request series. A route's label sets (its Gateway, route object and backends) are
// known at table build, but most of the series under them — six status classes per backend, the
// upstream error reasons — may never see a request; making them all up front would export a
// zero series for each, which a table of 10,000 routes multiplies into hundreds of thousands.
// So a label set's children are made by the first request that needs one (WithLabelValues, a
// one-time allocation) and published in an atomic pointer: every later request only loads it and
// increments. The sets are shared by every table that serves the route (by label set, under
// requestSeries.mu), so a new snapshot keeps the children already made, and the series a set made
// are deleted when the last table holding it closes.
//
// A set is small because every route has one per backend and tables hold tens of thousands:
// its label values (also its key in requestSeries' maps, so no joined key string), its holders,
// and one pointer to the children made so far, nil until the first request (a fixed array per
// set would be 12 words, mostly nil, for each of them).

// labelSet is the label values of a set: a route's (backend "") or a route's backend's.
type labelSet struct{ gateway, route, backend string }

// numChildren is how many series a backend set can make: a request counter per status class,
// then an upstream error counter per reason.
const numChildren = int(numClasses) + int(numUpstreamErrors)

// madeChildren are the children a set made so far (nil: not yet). Copied on write: a request
// making one publishes a new array, at most numChildren times in the set's life.
type madeChildren [numChildren]prometheus.Counter

// backendSeries are the series of one (gateway, route, backend) label set.
type backendSeries struct {
	labelSet
	holders int // tables holding the set (under requestSeries.mu)
	made    atomic.Pointer[madeChildren]
}

// count counts one answered request of class.
func (b *backendSeries) count(s *requestSeries, class codeClass) {
	b.child(s, int(class)).Inc()
}

// upstreamError counts one failed exchange with an endpoint of the backend.
func (b *backendSeries) upstreamError(s *requestSeries, e upstreamError) {
	b.child(s, int(numClasses)+int(e)).Inc()
}

// child returns child i: one load of the made children and an index, as long as it exists.
func (b *backendSeries) child(s *requestSeries, i int) prometheus.Counter {
	if m := b.made.Load(); m != nil && m[i] != nil {
		return m[i]
	}
	return b.makeChild(s, i)
}

// makeChild is child's slow path: it makes child i and publishes a copy of the made children
// with it. Two requests racing here get the same child from the vector, and the one whose copy
// loses the swap tries again with the winner's.
func (b *backendSeries) makeChild(s *requestSeries, i int) prometheus.Counter {
	c := b.vecChild(s, i)
	for {
		old := b.made.Load()
		if old != nil && old[i] != nil {
			return old[i]
		}
		next := new(madeChildren)
		if old != nil {
			*next = *old
		}
		next[i] = c
		if b.made.CompareAndSwap(old, next) {
			return c
		}
	}
}

// vecChild is child i from its vector: a request counter or an upstream error counter.
func (b *backendSeries) vecChild(s *requestSeries, i int) prometheus.Counter {
	vec, last := s.childVec(i)
	return vec.WithLabelValues(b.gateway, b.route, b.backend, last)
}

// childVec is the vector of a backend set's child i and the child's last label value: the
// request counter of status class i, or past the classes the upstream error counter of a reason.
func (s *requestSeries) childVec(i int) (*prometheus.CounterVec, string) {
	if i < int(numClasses) {
		return s.requests, classLabels[i]
	}
	return s.upstreamErrors, upstreamErrorLabels[i-int(numClasses)]
}

// deleteMade deletes the children the set made (under requestSeries.mu, once no table holds it).
func (b *backendSeries) deleteMade(s *requestSeries) {
	m := b.made.Load()
	if m == nil {
		return
	}
	for i, c := range m {
		if c != nil {
			vec, last := s.childVec(i)
			vec.DeleteLabelValues(b.gateway, b.route, b.backend, last)
		}
	}
}

// routeSeries is one (gateway, route) label set (backend ""): its duration histogram's cells
// are made by the first request (routeObs.observeDuration) and deleted with the set.
type routeSeries struct {
	labelSet
	holders int
}

// observeDuration observes one request's duration in the route's histogram.
func (o *routeObs) observeDuration(d time.Duration) {
	c := o.duration.Load()
	if c == nil {
		c = o.makeDuration()
	}
	c.observe(d)
}

// makeDuration is observeDuration's slow path: the label set's cells from the family, once per
// table (every table and racer gets the same cells). A request of a table whose holds were
// released already gets cells of its own, so that it does not make a series no table deletes.
func (o *routeObs) makeDuration() *durationCells {
	s := o.series
	s.mu.Lock()
	defer s.mu.Unlock()
	var c *durationCells
	if o.held.released {
		c = new(durationCells)
	} else {
		c = s.duration.with(o.route.gateway, o.route.route)
	}
	o.duration.Store(c)
	return c
}
