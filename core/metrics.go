package core

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics is how a module exports Prometheus series through the proxy's registry (the /metrics
// of `coxswain proxy`). Modules are built per table, but a series must live as long as the
// process, so a module does not register collectors itself: it asks Metrics for a counter or
// gauge vector by name in Provision (BuildContext.Metrics), and every table that asks for the same
// name gets the same vector, registered once. Names must begin with "coxswain_". A nil *Metrics (a
// proxy without a registry, a BuildContext made by a test) hands out working vectors that nothing
// exports.
type Metrics struct {
	reg prometheus.Registerer

	mu   sync.Mutex
	vecs map[string]*vecEntry
}

// vecEntry is one registered family: a *prometheus.CounterVec, GaugeVec, HistogramVec or a
// CollectorOf's collector.
type vecEntry struct {
	vec    prometheus.Collector
	help   string
	labels []string
}

// NewMetrics returns the module metrics of a proxy that registers them on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{reg: reg, vecs: map[string]*vecEntry{}}
}

// CounterVec returns the counter vector name with the given help and label names, made and
// registered on first use. Asking again for a name with another help, other labels or as another
// kind of vector is an error: one name is one series family.
func (m *Metrics) CounterVec(name, help string, labels ...string) (*prometheus.CounterVec, error) {
	return vecOf(m, name, help, labels, func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	})
}

// GaugeVec is CounterVec for a gauge vector.
func (m *Metrics) GaugeVec(name, help string, labels ...string) (*prometheus.GaugeVec, error) {
	return vecOf(m, name, help, labels, func() *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	})
}

func vecOf[V prometheus.Collector](m *Metrics, name, help string, labels []string, newVec func() V) (V, error) {
	var zero V
	if !strings.HasPrefix(name, "coxswain_") {
		return zero, fmt.Errorf("metric %q: module metrics are named coxswain_*", name)
	}
	if m == nil {
		return newVec(), nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.vecs[name]; ok {
		v, sameKind := e.vec.(V)
		if !sameKind || e.help != help || !slices.Equal(e.labels, labels) {
			return zero, fmt.Errorf("metric %s is already defined as a %T with labels %v", name, e.vec, e.labels)
		}
		return v, nil
	}
	vec := newVec()
	if m.reg != nil {
		if err := m.reg.Register(vec); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return zero, fmt.Errorf("metric %s: %w", name, err)
			}
			existing, ok := are.ExistingCollector.(V)
			if !ok {
				return zero, fmt.Errorf("metric %s: %w", name, err)
			}
			vec = existing
		}
	}
	m.vecs[name] = &vecEntry{vec: vec, help: help, labels: slices.Clone(labels)}
	return vec, nil
}

// CollectorOf is CounterVec for a family its caller keeps itself and exports at scrape (a
// prometheus.Collector whose Collect makes the series): newC makes it on first use; asking again
// for the name returns the one made, if it is of the same type, help and labels.
func CollectorOf[C prometheus.Collector](m *Metrics, name, help string, labels []string, newC func() C) (C, error) {
	return vecOf(m, name, help, labels, newC)
}

// HistogramVec is CounterVec for a histogram vector with the given bucket boundaries. The buckets
// are part of the family: asking again for the name with other labels is an error, as for the
// other kinds; the first caller's buckets are kept.
func (m *Metrics) HistogramVec(name, help string, buckets []float64, labels ...string) (*prometheus.HistogramVec, error) {
	return vecOf(m, name, help, labels, func() *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	})
}
