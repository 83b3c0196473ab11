package h2server

import (
	"errors"
	"net"
	"time"

	"golang.org/x/net/http2"
)

// streamError resets one stream; the connection carries on.
type streamError struct {
	id   uint32
	code http2.ErrCode
}

func (e streamError) Error() string { return "http2: stream error " + e.code.String() }

const maxWindow = 1<<31 - 1

// readLoop reads and dispatches frames until the connection ends. It returns the error that
// ended it (nil for a graceful end).
func (c *conn) readLoop() error {
	first := true
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) && !first {
				c.resetID(se.StreamID, se.Code)
				continue
			}
			if c.drained(err) {
				return nil
			}
			return err
		}
		if first {
			if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
				return connError{http2.ErrCodeProtocol, "first frame is not SETTINGS"}
			}
			_ = c.nc.SetReadDeadline(time.Time{})
			first = false
		}
		if err := c.dispatch(f); err != nil {
			var se streamError
			if errors.As(err, &se) {
				c.resetID(se.id, se.code)
				continue
			}
			return err
		}
	}
}

// drained reports whether err is the read deadline a graceful drain set once the streams were
// done.
func (c *conn) drained(err error) bool {
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goingAway && len(c.streams) == 0
}

func (c *conn) dispatch(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		return c.onHeaders(f)
	case *http2.ContinuationFrame:
		return c.onContinuation(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		return c.onPing(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f)
	case *http2.PriorityFrame:
		if err := c.flood.count(); err != nil {
			return err
		}
		if f.StreamDep == f.StreamID {
			return streamError{f.StreamID, http2.ErrCodeProtocol}
		}
	case *http2.PushPromiseFrame:
		return connError{http2.ErrCodeProtocol, "PUSH_PROMISE from a client"}
	case *http2.GoAwayFrame:
		// The client will open no more streams; those open are served to the end.
	}
	return nil // unknown frame types are ignored (RFC 9113 §4.1)
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	if err := c.flood.count(); err != nil {
		return err
	}
	// The write lock is held from applying the settings to writing their ACK, so that the ACK
	// precedes every frame sent under them: a stream waiting for window that the new
	// SETTINGS_INITIAL_WINDOW_SIZE grants writes its DATA after the ACK (a client may expect
	// that order; h2spec 6.9.2/1 skipped such a DATA while it waited for the ACK). wmu is taken
	// before mu here (setPeerWindow), never the other way round.
	c.lockW()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			return c.setPeerWindow(int64(s.Val))
		case http2.SettingMaxFrameSize:
			c.peerFrame.Store(int32(s.Val))
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
			c.tableResized = true
		}
		return nil
	})
	if err != nil {
		c.wmu.Unlock()
		return err
	}
	return c.unlockW(c.fr.WriteSettingsAck())
}

// setPeerWindow applies a new SETTINGS_INITIAL_WINDOW_SIZE to every open stream (RFC 9113
// §6.9.2): the difference is added to their send windows, which may go negative.
func (c *conn) setPeerWindow(v int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delta := v - c.peerWin
	c.peerWin = v
	for _, st := range c.streams {
		st.sendWin += delta
		if st.sendWin > maxWindow {
			return connError{http2.ErrCodeFlowControl, "stream window overflow"}
		}
	}
	c.signalWindowLocked()
	return nil
}

func (c *conn) onPing(f *http2.PingFrame) error {
	if f.IsAck() {
		return nil
	}
	c.lockW() // sentWork is the writers'
	if err := c.flood.ping(c.recvWork + c.sentWork); err != nil {
		c.wmu.Unlock()
		return err
	}
	return c.unlockW(c.fr.WritePing(true, f.Data))
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	inc := int64(f.Increment)
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWin += inc
		if c.sendWin > maxWindow {
			return connError{http2.ErrCodeFlowControl, "connection window overflow"}
		}
		c.signalWindowLocked()
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxStreamID {
			return connError{http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream"}
		}
		return nil // a stream closed a moment ago
	}
	st.sendWin += inc
	if st.sendWin > maxWindow {
		return streamError{f.StreamID, http2.ErrCodeFlowControl}
	}
	c.signalWindowLocked()
	return nil
}

func (c *conn) onReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	st := c.streams[f.StreamID]
	if st == nil {
		idle := f.StreamID > c.maxStreamID
		c.mu.Unlock()
		if idle {
			return connError{http2.ErrCodeProtocol, "RST_STREAM on an idle stream"}
		}
		return nil
	}
	st.remoteClosed = true
	already := st.reset
	if !already { // after our own reset the client's frames are still ignored
		c.gone.noteReset(st.id, true)
	}
	st.reset, st.clientReset = true, true
	if !already && !st.draining {
		c.resets++ // a client that stops sending after a complete response cancels nothing
	}
	calm := c.resets > resetAllowance+c.completed
	c.signalWindowLocked()
	drained := c.retireLocked(st)
	c.mu.Unlock()
	if drained {
		_ = c.nc.SetReadDeadline(time.Now())
	}
	st.abort(errStreamReset)
	if calm {
		return connError{http2.ErrCodeEnhanceYourCalm, "too many streams reset by the client"}
	}
	return nil
}

// resetAllowance is how many more client resets than completed streams a connection may have
// before it is closed (rapid reset, CVE-2023-44487): cancelling now and then is normal, opening
// streams only to reset them is not.
const resetAllowance = 200

// resetID sends RST_STREAM for a stream error and aborts the stream if it is open. Its handler,
// if any, keeps its concurrency slot until it returns.
func (c *conn) resetID(id uint32, code http2.ErrCode) { c.reset(id, code, true) }

// reset is resetID; without always, a stream reset already is left alone (see resetStream).
func (c *conn) reset(id uint32, code http2.ErrCode, always bool) {
	c.mu.Lock()
	st := c.streams[id]
	if st != nil && st.reset && !always {
		c.mu.Unlock()
		return
	}
	if st != nil && st.reset {
		st = nil // aborted already; the frame still tells the client
	} else if st != nil {
		st.reset = true
		st.remoteClosed = true
		c.signalWindowLocked()
	}
	drained := st != nil && c.retireLocked(st)
	c.gone.noteReset(id, false)
	c.mu.Unlock()
	if drained {
		_ = c.nc.SetReadDeadline(time.Now())
	}
	if st != nil {
		st.abort(errStreamReset)
	}
	c.lockW()
	_ = c.unlockW(c.fr.WriteRSTStream(id, code))
}

// resetStream resets a stream the server gives up on (a handler abort, a stall), unless it is
// reset already: by the client (RST_STREAM never answers RST_STREAM) or by the read loop, whose
// code says what was wrong. A handler that fails because the read loop reset its stream must
// not get its own code (CANCEL, INTERNAL_ERROR) out first (h2spec 6.9.1/3 saw CANCEL before
// FLOW_CONTROL_ERROR).
func (c *conn) resetStream(st *stream, code http2.ErrCode) { c.reset(st.id, code, false) }

// floodGuard rate-limits the control frames a client can make the server answer or account for
// (SETTINGS, PING, PRIORITY, empty DATA): more than floodLimit in floodWindow closes the
// connection with ENHANCE_YOUR_CALM.
//
// A PING that follows a request or response frame is not counted (see ping): grpc-go sends a
// BDP-estimation PING whenever it receives DATA and has none outstanding, and its estimate never
// reaches its cap with small messages, so a busy gRPC client pings once per call at one call in
// flight (4,000+ a second on loopback) and once per round trip at more. Counting those closed
// healthy connections every fraction of a second and killed the calls in flight on them
// (issue 19's "Unavailable" failures at 16 calls in flight).
type floodGuard struct {
	start time.Time
	n     int
	// freePings is how many PINGs went uncounted: each request or response frame (recvWork +
	// sentWork) earns one.
	freePings uint64
}

const (
	floodLimit  = 1000
	floodWindow = time.Second
)

func (g *floodGuard) count() error {
	now := time.Now()
	if now.Sub(g.start) > floodWindow {
		g.start, g.n = now, 0
	}
	g.n++
	if g.n > floodLimit {
		return connError{http2.ErrCodeEnhanceYourCalm, "control frame flood"}
	}
	return nil
}

// ping accounts for a PING, given work: the request and response frames (HEADERS, DATA with a
// payload) the connection has carried so far, both ways. A PING is free while the PINGs let
// through number fewer than those frames, so pings in proportion to traffic (one per call, one
// per message received) never count, while a PING flood, which comes with no such frames or far
// more PINGs than frames, meets the limit as before. Credit is not capped: a client that lags
// behind a fast stream pings for frames it received long ago, and a PING saved up by earlier
// traffic costs the server no more than the frame that earned it (an acknowledgement written
// under the same write lock and stall timeout as any response, so unread ones cannot pile up).
func (g *floodGuard) ping(work uint64) error {
	if work > g.freePings {
		g.freePings++
		return nil
	}
	return g.count()
}
