package proxy

import "github.com/coxswain-labs/coxswain/core"

// breakerSet is the circuit breaker of each endpoint of one (route, cluster). Placeholder until
// the breaker lands: it admits everything.
type breakerSet struct{}

// admit reports whether ep's breaker lets a request through, and returns the breaker to tell
// how it went. A nil set (no breaker configured) admits everything.
func (s *breakerSet) admit(*core.Endpoint) (*breaker, bool) { return nil, true }

// breaker is one endpoint's state machine.
type breaker struct{}

// done records how an admitted request ended. A nil breaker does nothing.
func (b *breaker) done(outcome) {}
