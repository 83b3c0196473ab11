package controller

import (
	"context"
	"time"
)

// coalescer paces translations: the first change after a quiet spell is translated at once, and
// changes that keep coming are batched with a delay that grows with their rate. After each wake-up
// the next one is held back until a gap has passed since it; the gap starts at holdoff, doubles for
// every wait during which more changes came, halves for every wait during which none did, is
// capped at maxDelay, and falls back to holdoff once the changes pause for twice the gap.
// So a lone edit propagates with no added delay, a burst of edits becomes a few translations
// instead of one each, and no change ever waits longer than maxDelay.
//
// The earlier design waited for holdoff of silence before every translation, which put a fixed
// holdoff (75ms by default) on the propagation of every change, including the lone ones. A later
// one kept the grown gap while changes came one at a time, each right after the previous one was
// served (a client that waits for its change to take effect before making the next): every one
// of them then waited the whole max delay (BenchmarkPropagation's endpoint changes: ~1 s each).
// Halving on a wait that gathered nothing brings such a stream back to holdoff in a few changes,
// while a burst, whose waits gather changes, keeps its gap.
type coalescer struct {
	holdoff, maxDelay time.Duration
	ch                chan struct{}

	last time.Time // when Wait last returned
	step uint      // the gap is holdoff<<step
}

func newCoalescer(holdoff, maxDelay time.Duration) *coalescer {
	return &coalescer{holdoff: min(holdoff, maxDelay), maxDelay: maxDelay, ch: make(chan struct{}, 1)}
}

// Notify records that something changed. It never blocks.
func (c *coalescer) Notify() {
	select {
	case c.ch <- struct{}{}:
	default:
	}
}

// gap is how long after a wake-up the next one is held back.
func (c *coalescer) gap() time.Duration {
	if c.step >= 32 || c.holdoff<<c.step >= c.maxDelay || c.holdoff<<c.step <= 0 {
		return c.maxDelay
	}
	return c.holdoff << c.step
}

// Wait blocks until there is a change to translate and the pacing allows it, or ctx is done.
// Notifications that arrive while it is held back are folded into the same wake-up. Only one
// goroutine may call Wait.
func (c *coalescer) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ch:
	}
	gap := c.gap()
	since := time.Since(c.last)
	switch {
	case since >= 2*gap:
		c.step = 0 // a quiet spell: the next burst starts afresh
	case since < gap:
		absorbed, err := c.hold(ctx, gap-since)
		if err != nil {
			return err
		}
		switch {
		case absorbed > 0 && c.gap() < c.maxDelay:
			c.step++ // changes keep coming faster than the gap
		case absorbed == 0 && c.step > 0:
			c.step-- // one change at a time: no burst to gather
		}
	}
	c.last = time.Now()
	return nil
}

// hold waits d, absorbing the notifications that arrive meanwhile; it returns how many did.
func (c *coalescer) hold(ctx context.Context, d time.Duration) (int, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-timer.C:
			return n, nil
		case <-c.ch:
			n++
		}
	}
}
