package h2client

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/net/http2"
)

// readLoop reads and dispatches the connection's frames until it fails.
func (c *conn) readLoop() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.resetStream(se.StreamID, se.Code, fmt.Errorf("%w: %v", ErrProtocol, se))
				continue
			}
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			c.close(err)
			return
		}
		if err := c.dispatch(f); err != nil {
			_ = c.write(func() error { return c.fr.WriteGoAway(0, http2.ErrCodeProtocol, nil) })
			c.close(err)
			return
		}
	}
}

func (c *conn) dispatch(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if s := c.stream(f.StreamID); s != nil {
			s.onHeaders(f)
		}
	case *http2.DataFrame:
		c.onData(f)
	case *http2.RSTStreamFrame:
		if s := c.stream(f.StreamID); s != nil {
			c.forget(s)
			s.fail(http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
		}
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			_ = c.write(func() error { return c.fr.WritePing(true, data) })
		}
	case *http2.GoAwayFrame:
		c.onGoAway(f)
	case *http2.WindowUpdateFrame:
		c.onWindowUpdate(f)
	case *http2.PushPromiseFrame:
		return fmt.Errorf("%w: PUSH_PROMISE though push is disabled", ErrProtocol)
	}
	return nil
}

func (c *conn) stream(id uint32) *Stream {
	c.mu.Lock()
	s := c.streams[id]
	c.mu.Unlock()
	return s
}

// forget removes s from the stream table (the peer reset it, or it is complete).
func (c *conn) forget(s *Stream) {
	c.mu.Lock()
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
	}
	c.mu.Unlock()
}

// onData queues a DATA frame's payload on its stream. Bytes for a stream we no longer track are
// credited back to the connection window at once.
func (c *conn) onData(f *http2.DataFrame) {
	n := int32(f.Header().Length) //nolint:gosec // a frame length is 24 bits
	s := c.stream(f.StreamID)
	if s == nil || !s.onData(f.Data(), n, f.StreamEnded()) {
		c.credit(n)
	}
}

// credit returns n consumed bytes to the connection's receive window, by WINDOW_UPDATE once a
// good share of it has been used.
func (c *conn) credit(n int32) {
	if n <= 0 {
		return
	}
	c.mu.Lock()
	c.recvUnack += n
	send := c.recvUnack
	if send < connWindow/4 {
		c.mu.Unlock()
		return
	}
	c.recvUnack = 0
	c.mu.Unlock()
	_ = c.write(func() error { return c.fr.WriteWindowUpdate(0, uint32(send)) }) //nolint:gosec // positive
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	var tableSize uint32
	var haveTable bool
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		switch st.ID {
		case http2.SettingMaxConcurrentStreams:
			c.maxStreams = min(st.Val, maxStreams)
		case http2.SettingInitialWindowSize:
			delta := int32(st.Val) - c.initWindow //nolint:gosec // Valid bounds it to 2^31-1
			c.initWindow = int32(st.Val)          //nolint:gosec // as above
			for _, s := range c.streams {
				s.sendWindow += delta
				s.wakeSender()
			}
		case http2.SettingMaxFrameSize:
			c.maxFrame = st.Val
		case http2.SettingHeaderTableSize:
			tableSize, haveTable = st.Val, true
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.write(func() error {
		if haveTable {
			c.henc.SetMaxDynamicTableSizeLimit(tableSize)
		}
		return c.fr.WriteSettingsAck()
	})
}

// onGoAway stops new streams on c; streams the peer will not process fail now, the others finish.
func (c *conn) onGoAway(f *http2.GoAwayFrame) {
	c.mu.Lock()
	c.goaway = true
	var gone []*Stream
	for id, s := range c.streams {
		if id > f.LastStreamID {
			gone = append(gone, s)
			delete(c.streams, id)
		}
	}
	c.mu.Unlock()
	for _, s := range gone {
		s.fail(ErrGoAway)
	}
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.StreamID == 0 {
		c.sendWindow += int32(f.Increment) //nolint:gosec // 31 bits
		for _, s := range c.streams {
			s.wakeSender()
		}
		return
	}
	if s := c.streams[f.StreamID]; s != nil {
		s.sendWindow += int32(f.Increment) //nolint:gosec // 31 bits
		s.wakeSender()
	}
}

// resetStream sends RST_STREAM for id and fails the stream locally with err.
func (c *conn) resetStream(id uint32, code http2.ErrCode, err error) {
	s := c.stream(id)
	if s != nil {
		c.forget(s)
		s.fail(err)
	}
	_ = c.write(func() error {
		if s != nil {
			s.wclosed.Store(true)
		}
		return c.fr.WriteRSTStream(id, code)
	})
}
