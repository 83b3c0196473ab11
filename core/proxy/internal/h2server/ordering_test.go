package h2server

import (
	"io"
	"net/http"
	"testing"

	"golang.org/x/net/http2"
)

// TestSettingsAckPrecedesDataItAllows: a stream waiting for window that a SETTINGS frame's new
// SETTINGS_INITIAL_WINDOW_SIZE grants sends its DATA after the SETTINGS ACK, never before
// (h2spec 6.9.2/1 waits for the ACK, skipping other frames, then for the DATA). The race is
// between the read loop's ACK and the woken handler's write, so it is run many times.
func TestSettingsAckPrecedesDataItAllows(t *testing.T) {
	_, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "x")
	})})
	c := dialRaw(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	for i := range 50 {
		id := uint32(2*i + 1)
		if i > 0 {
			if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
				t.Fatal(err)
			}
		}
		c.until("the ACK of INITIAL_WINDOW_SIZE 0", func(f http2.Frame) bool {
			s, ok := f.(*http2.SettingsFrame)
			return ok && s.IsAck()
		})
		c.request(id, true)
		// Without credit the header goes out alone; the handler then waits for window.
		c.until("the response header", func(f http2.Frame) bool {
			if d, ok := f.(*http2.DataFrame); ok && len(d.Data()) > 0 {
				t.Fatalf("stream %d: DATA without window", id)
			}
			return f.Header().Type == http2.FrameHeaders && f.Header().StreamID == id
		})
		if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1}); err != nil {
			t.Fatal(err)
		}
		acked := false
		c.until("the DATA the new window allows", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.SettingsFrame:
				acked = acked || f.IsAck()
			case *http2.DataFrame:
				if f.StreamID == id && len(f.Data()) > 0 {
					if !acked {
						t.Fatalf("stream %d: DATA before the SETTINGS ACK", id)
					}
					return true
				}
			}
			return false
		})
	}
}

// TestReadLoopResetCodeFirst: when the read loop resets a stream whose handler waits for window
// (here the connection's window is used up and a WINDOW_UPDATE overflows the stream's), the
// client's first RST_STREAM carries the read loop's code (FLOW_CONTROL_ERROR), not the CANCEL of
// the handler's failed write, which used to race it for the write lock (h2spec 6.9.1/3). Run
// many times for the race.
func TestReadLoopResetCodeFirst(t *testing.T) {
	_, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(make([]byte, 128<<10))
	})})
	c := dialRaw(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	for i := range 50 {
		id := uint32(2*i + 1)
		c.request(id, true)
		got := 0
		c.until("the connection's window used up", func(f http2.Frame) bool {
			if d, ok := f.(*http2.DataFrame); ok && d.StreamID == id {
				got += len(d.Data())
			}
			return got == 65535
		})
		// The stream's window is 1 MiB - 65535: this overflows it.
		if err := c.fr.WriteWindowUpdate(id, maxWindow); err != nil {
			t.Fatal(err)
		}
		if code := c.firstReset(id); code != http2.ErrCodeFlowControl {
			t.Fatalf("stream %d: first RST_STREAM %s, want FLOW_CONTROL_ERROR", id, code)
		}
		if err := c.fr.WriteWindowUpdate(0, 65535); err != nil { // the next stream's
			t.Fatal(err)
		}
	}
}
