package h2server

import "time"

// A PING's acknowledgement rides with the connection's next write when one is coming anyway,
// rather than costing a write(2) of its own.
//
// Why: grpc-go sends a BDP-estimation PING with most calls (docs/performance.md, "Issue 19,
// third pass"), in the same packet as its next request: at one call in flight every call cost
// the client leg two writes, the acknowledgement at once and the response a round trip to the
// upstream later. A write on loopback also carries the receiver's TCP work, so it is the
// dearest thing a call does. Now the acknowledgement waits in the write buffer while more of
// the client's frames are already read (a request may follow it) or a handler is running (its
// response will flush), and goes out ahead of the response's frames in the same write.
//
// Only on a quiet connection (no handler running, or one): with calls overlapping, responses are
// flushed by the flusher in batches anyway, and holding acknowledgements there measured 3-5% more
// CPU per call at 16 calls in flight (docs/performance.md, "Issue 19, fourth pass"), so they go
// the ordinary way. The wait is bounded: the read loop flushes held acknowledgements when it has nothing more
// buffered and no handler runs, and a timer flushes them after ackDelay whatever happens (a
// long-running stream that writes nothing). RFC 9113 §6.7 asks that PING responses be given
// higher priority than other frames; they still leave first in their write, a fraction of a
// round trip later at most.

// ackDelay bounds how long an acknowledgement may wait for a response to ride with.
const ackDelay = time.Millisecond

// unlockWAck releases the write lock after writing a PING acknowledgement: it is held for the
// next write if one is coming (see above), else flushed as unlockW would. Called by the read
// loop (c.br is its own) with wmu held.
func (c *conn) unlockWAck(err error) error {
	busy := c.busy.Load()
	if err != nil || c.werr != nil || busy > 1 || c.br.Buffered() == 0 && busy == 0 {
		return c.unlockW(err)
	}
	if !c.ackHeld.Load() {
		c.ackHeld.Store(true)
		if c.ackTimer == nil {
			c.ackTimer = time.AfterFunc(c.srv.cfg.testAckDelay, c.flushHeldAcks)
		} else {
			c.ackTimer.Reset(c.srv.cfg.testAckDelay)
		}
	}
	c.wmu.Unlock()
	return nil
}

// afterFrame runs after the read loop dispatched a frame: acknowledgements held for a request
// that did not come (nothing more is buffered and no handler runs) go out now, before the read
// loop waits for the client.
func (c *conn) afterFrame() {
	if c.ackHeld.Load() && c.br.Buffered() == 0 && c.busy.Load() == 0 {
		c.flushHeldAcks()
	}
}

// flushHeldAcks flushes acknowledgements still held (the read loop's check, or the timer).
func (c *conn) flushHeldAcks() {
	c.wmu.Lock()
	if c.ackHeld.Load() {
		_ = c.flushLocked(nil)
	}
	c.wmu.Unlock()
}

// ackFlushedLocked notes that a flush took the held acknowledgements along. Called with wmu
// held.
func (c *conn) ackFlushedLocked() {
	if c.ackHeld.Load() {
		c.ackHeld.Store(false)
		c.ackTimer.Stop()
	}
}
