package h2server

import "golang.org/x/net/http2"

// Frames on streams that are closed, or closed to the client (RFC 9113 §5.1). What a frame on
// such a stream calls for depends on how the stream closed, so the connection remembers that
// for the streams that left its table last:
//
//   - after the server sent RST_STREAM (a refused or malformed stream, a handler that gave up,
//     a drained one), frames are ignored: the client may have sent them before it saw the reset.
//     DATA among them still counts against the connection's flow-control window and is credited
//     back at once (onData);
//   - after the client sent RST_STREAM, any frame but PRIORITY is a stream error STREAM_CLOSED;
//   - after END_STREAM both ways, any frame but PRIORITY, WINDOW_UPDATE and RST_STREAM is a
//     connection error STREAM_CLOSED;
//   - a stream still open on the server's side after the client's END_STREAM (half-closed
//     remote) answers DATA and HEADERS with a stream error STREAM_CLOSED (§5.1, §6.1), as does a
//     stream closed too long ago to be remembered (§5.1 lets the ignoring end after a while).
//
// Resets are kept apart from normal closes so that a burst of completed streams does not push
// out the rare reset whose client frames are still in flight.

// closedHow is how a stream that left the table closed.
type closedHow uint8

const (
	closedUnknown   closedHow = iota // never opened (skipped), or forgotten
	closedEnded                      // END_STREAM both ways
	closedResetSent                  // the server sent RST_STREAM
	closedResetRecv                  // the client sent RST_STREAM
)

// closedStreams remembers the last streams that closed (rings of stream IDs; in reset, the top
// bit, which no stream ID has, marks a reset by the client). Guarded by the connection's mu.
type closedStreams struct {
	ended     [32]uint32
	endedNext uint32
	reset     [32]uint32
	resetNext uint32
}

const resetByClient = 1 << 31

func (r *closedStreams) noteEnded(id uint32) {
	r.ended[r.endedNext%uint32(len(r.ended))] = id
	r.endedNext++
}

func (r *closedStreams) noteReset(id uint32, byClient bool) {
	if byClient {
		id |= resetByClient
	}
	r.reset[r.resetNext%uint32(len(r.reset))] = id
	r.resetNext++
}

// how looks id up, resets first (a stream reset after it was noted ended is reset).
func (r *closedStreams) how(id uint32) closedHow {
	for _, v := range r.reset {
		switch v {
		case id:
			return closedResetSent
		case id | resetByClient:
			return closedResetRecv
		}
	}
	for _, v := range r.ended {
		if v == id {
			return closedEnded
		}
	}
	return closedUnknown
}

// closedHowLocked is how the stream id closed: st is its entry if it is still in the table (its
// handler has not returned), nil if it left it. Called with mu held, for a stream that is not
// idle (id <= maxStreamID) and that the client may no longer send on.
func (c *conn) closedHowLocked(st *stream, id uint32) closedHow {
	switch {
	case st == nil:
		return c.gone.how(id)
	case st.reset && st.clientReset:
		return closedResetRecv
	case st.reset:
		return closedResetSent
	case st.remoteClosed && st.responded.Load():
		return closedEnded
	}
	return closedUnknown // half-closed (remote): its response is still to come
}

// frameOnClosed is the verdict on a DATA frame or a header block (frame names it in the error)
// for a stream the client may no longer send on (see the top of this file): nil to ignore it,
// else the stream or connection error to answer with. A stream closed both ways makes it a
// connection error (h2spec http2/5.1/12 sends HEADERS on a stream whose response it has read).
func frameOnClosed(how closedHow, id uint32, frame string) error {
	switch how {
	case closedResetSent:
		return nil
	case closedEnded:
		return connError{http2.ErrCodeStreamClosed, frame + " on a closed stream"}
	}
	return streamError{id, http2.ErrCodeStreamClosed}
}
