package proxy

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coxswain-labs/coxswain/core"
)

// breakerSeries are the proxy's circuit breaker series, labelled by route object and endpoint
// address, with a count of the endpoint breakers that use each pair: two breakers share one
// (a policy change while the old table drains, two clusters of one route with the same address),
// and the pair's series are deleted when the last one is forgotten, so that endpoints that come
// and go (pods rescheduled) do not pile up series. Counters of an address that comes back start
// again from zero, which Prometheus's rate() reads as a reset.
type breakerSeries struct {
	state       *prometheus.GaugeVec
	rejected    *prometheus.CounterVec
	transitions *prometheus.CounterVec

	mu   sync.Mutex
	refs map[seriesKey]int
}

type seriesKey struct{ route, upstream string }

// breakerHandles are one endpoint breaker's series, resolved once so that the hot path only
// increments them.
type breakerHandles struct {
	state    prometheus.Gauge
	rejected prometheus.Counter
	to       [3]prometheus.Counter // by breakerState
}

func newBreakerSeries(m *core.Metrics) (*breakerSeries, error) {
	s := &breakerSeries{refs: map[seriesKey]int{}}
	var err error
	labels := []string{"route", "upstream"}
	if s.state, err = m.GaugeVec("coxswain_proxy_circuit_breaker_state",
		"Circuit breaker state per route and endpoint: 0 closed, 1 open, 2 half open.", labels...); err != nil {
		return nil, err
	}
	if s.rejected, err = m.CounterVec("coxswain_proxy_circuit_breaker_rejected_total",
		"Requests the endpoint's open circuit breaker refused (once per request): answered 503, or sent to another endpoint.", labels...); err != nil {
		return nil, err
	}
	if s.transitions, err = m.CounterVec("coxswain_proxy_circuit_breaker_transitions_total",
		"Circuit breaker state changes per route and endpoint, by the state entered.", "route", "upstream", "to"); err != nil {
		return nil, err
	}
	return s, nil
}

// acquire returns the series of (route, upstream) for a new endpoint breaker, which starts closed.
func (s *breakerSeries) acquire(route, upstream string) breakerHandles {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := seriesKey{route: route, upstream: upstream}
	s.refs[k]++
	h := breakerHandles{
		state:    s.state.WithLabelValues(route, upstream),
		rejected: s.rejected.WithLabelValues(route, upstream),
	}
	for _, st := range []breakerState{stateClosed, stateOpen, stateHalfOpen} {
		h.to[st] = s.transitions.WithLabelValues(route, upstream, st.label())
	}
	if s.refs[k] == 1 {
		h.state.Set(float64(stateClosed))
	}
	return h
}

// release drops an endpoint breaker's hold on its series, deleting them with the last one.
func (s *breakerSeries) release(route, upstream string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := seriesKey{route: route, upstream: upstream}
	if s.refs[k]--; s.refs[k] > 0 {
		return
	}
	delete(s.refs, k)
	s.state.DeleteLabelValues(route, upstream)
	s.rejected.DeleteLabelValues(route, upstream)
	for _, st := range []breakerState{stateClosed, stateOpen, stateHalfOpen} {
		s.transitions.DeleteLabelValues(route, upstream, st.label())
	}
}

// breakerSeriesOf returns the proxy's breaker series, made on the first build that needs them
// (builds run under p.mu).
func (p *Proxy) breakerSeriesOf() (*breakerSeries, error) {
	if p.breakers != nil {
		return p.breakers, nil
	}
	s, err := newBreakerSeries(p.metrics)
	if err != nil {
		return nil, fmt.Errorf("circuit breaker metrics: %w", err)
	}
	p.breakers = s
	return s, nil
}
