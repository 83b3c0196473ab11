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
