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
// process, so a module does not register collectors itself: it asks Metrics for a counter vector
// by name in Provision (BuildContext.Metrics), and every table that asks for the same name gets
// the same vector, registered once. Names must begin with "coxswain_". A nil *Metrics (a proxy
// without a registry, a BuildContext made by a test) hands out working vectors that nothing
// exports.
type Metrics struct {
	reg prometheus.Registerer

	mu       sync.Mutex
	counters map[string]*counterEntry
}

type counterEntry struct {
	vec    *prometheus.CounterVec
	help   string
	labels []string
}

// NewMetrics returns the module metrics of a proxy that registers them on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	return &Metrics{reg: reg, counters: map[string]*counterEntry{}}
}

// CounterVec returns the counter vector name with the given help and label names, made and
// registered on first use. Asking again for a name with another help or other labels is an
// error: one name is one series family.
func (m *Metrics) CounterVec(name, help string, labels ...string) (*prometheus.CounterVec, error) {
	if !strings.HasPrefix(name, "coxswain_") {
		return nil, fmt.Errorf("metric %q: module metrics are named coxswain_*", name)
	}
	newVec := func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	if m == nil {
		return newVec(), nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.counters[name]; ok {
		if e.help != help || !slices.Equal(e.labels, labels) {
			return nil, fmt.Errorf("metric %s is already defined with labels %v", name, e.labels)
		}
		return e.vec, nil
	}
	vec := newVec()
	if m.reg != nil {
		if err := m.reg.Register(vec); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("metric %s: %w", name, err)
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, fmt.Errorf("metric %s: %w", name, err)
			}
			vec = existing
		}
	}
	m.counters[name] = &counterEntry{vec: vec, help: help, labels: slices.Clone(labels)}
	return vec, nil
}
