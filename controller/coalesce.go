package controller

import (
	"context"
	"time"
)

// coalescer turns bursts of notifications into single wake-ups: Wait returns once no notification
// has arrived for holdoff, or maxDelay after the first one of the burst, whichever is sooner.
type coalescer struct {
	holdoff, maxDelay time.Duration
	ch                chan struct{}
}

func newCoalescer(holdoff, maxDelay time.Duration) *coalescer {
	return &coalescer{holdoff: holdoff, maxDelay: maxDelay, ch: make(chan struct{}, 1)}
}

// Notify records that something changed. It never blocks.
func (c *coalescer) Notify() {
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// Wait blocks until a burst of notifications has settled, or ctx is done.
func (c *coalescer) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ch:
	}
	deadline := time.Now().Add(c.maxDelay)
	timer := time.NewTimer(min(c.holdoff, c.maxDelay))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case <-c.ch:
			timer.Reset(min(c.holdoff, time.Until(deadline)))
		}
	}
}
