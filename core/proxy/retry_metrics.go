package proxy

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// retryCounters are coxswain_proxy_retries_total of one route object, by reason, resolved once
// per table so that a retry only increments one.
type retryCounters struct {
	by [numReasons]prometheus.Counter
}

func (c *retryCounters) inc(r retryReason) {
	if c != nil && c.by[r] != nil {
		c.by[r].Inc()
	}
}

// retryCountersOf returns the counters of the route object named by the IR route name route,
// made on the first build that needs them (builds run under p.mu).
func (p *Proxy) retryCountersOf(route string) (*retryCounters, error) {
	if p.retries == nil {
		vec, err := p.metrics.CounterVec("coxswain_proxy_retries_total",
			"Upstream tries sent again, per route and reason (status, connect, refused_stream, reset, backend_timeout); "+
				"body_too_large counts failed tries not retried because their request body was larger than the 64 KiB kept for replay.",
			"route", "reason")
		if err != nil {
			return nil, fmt.Errorf("retry metrics: %w", err)
		}
		p.retries = vec
	}
	obj := routeObject(route)
	c := &retryCounters{}
	for r := reasonStatus; r < numReasons; r++ {
		c.by[r] = p.retries.WithLabelValues(obj, reasonLabels[r])
	}
	return c, nil
}
