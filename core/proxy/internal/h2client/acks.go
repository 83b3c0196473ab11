package h2client

import "time"

// A PING's acknowledgement waits in the write buffer for the connection's next write (the next
// request, or any other frame) rather than costing a write(2) of its own, for at most ackDelay.
//
// Why: grpc-go's server sends a BDP-estimation PING with most responses while its window
// estimate is under its cap, which with small messages is forever (docs/performance.md, "Issue
// 19, third pass"): at one call in flight, every call cost the upstream leg two writes, the
// request and, after its response, the acknowledgement. On a busy connection the next request
// follows within a fraction of a millisecond and takes the acknowledgement along; on a quiet one
// the timer sends it. Only while at most one stream is open (the read loop's choice): with more,
// the flusher batches the acknowledgement with the requests anyway, and holding it there measured
// more CPU per call at 16 calls in flight (docs/performance.md, "Issue 19, fourth pass"). The peer's round-trip estimate grows by the wait, which only makes its
// window grow sooner; keepalive timeouts are seconds.

// ackDelay bounds how long an acknowledgement waits for a write to ride with.
const ackDelay = time.Millisecond

// ack writes the acknowledgement of a PING carrying data and holds it for the next flush.
func (c *conn) ack(data [8]byte) {
	c.wmu.Lock()
	err := c.werr
	if err == nil {
		if err = c.fr.WritePing(true, data); err != nil {
			c.werr = err
		}
	}
	if err == nil && !c.ackHeld {
		c.ackHeld = true
		if c.ackTimer == nil {
			c.ackTimer = time.AfterFunc(c.pool.ackDelay, c.flushHeldAcks)
		} else {
			c.ackTimer.Reset(c.pool.ackDelay)
		}
	}
	c.wmu.Unlock()
	if err != nil {
		c.close(err)
	}
}

// flushHeldAcks sends acknowledgements no other write took along (the timer).
func (c *conn) flushHeldAcks() {
	c.wmu.Lock()
	err := c.werr
	if err == nil && c.ackHeld {
		c.ackHeld = false
		if err = c.bw.Flush(); err != nil {
			c.werr = err
		}
	}
	c.wmu.Unlock()
	if err != nil {
		c.close(err)
	}
}

// ackFlushedLocked notes that a flush took the held acknowledgements along (c.wmu held).
func (c *conn) ackFlushedLocked() {
	if c.ackHeld {
		c.ackHeld = false
		c.ackTimer.Stop()
	}
}
