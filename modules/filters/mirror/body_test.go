package mirror

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestTeeTake: what the tee hands the mirror, for bodies read whole, in part, or past MaxBody.
func TestTeeTake(t *testing.T) {
	for _, tt := range []struct {
		name    string
		body    string
		length  int64 // declared; -1 chunked
		read    int   // bytes the primary reads; -1 to EOF
		wantRes int
	}{
		{"declared, read to its length", "hello", 5, 5, -1},
		{"chunked, read to EOF", "hello", -1, -1, -1},
		{"declared, read in part", "hello", 5, 2, iIncomplete},
		{"chunked, read in part", "hello", -1, 3, iIncomplete},
		{"chunked, past MaxBody", strings.Repeat("z", MaxBody+10), -1, -1, iTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			r.ContentLength = tt.length
			te := teeOf(r)
			if again := teeOf(r); again != te {
				t.Fatal("a second mirror installed a second tee")
			}
			var primary []byte
			if tt.read < 0 {
				primary, _ = io.ReadAll(r.Body)
			} else {
				primary = make([]byte, tt.read)
				_, _ = io.ReadFull(r.Body, primary)
			}
			body, res := te.take(tt.length)
			if res != tt.wantRes {
				t.Fatalf("take = %d, want %d", res, tt.wantRes)
			}
			if res < 0 && !bytes.Equal(body, primary) {
				t.Errorf("mirror body %q, primary read %q", body, primary)
			}
			// Reads after take pass through untouched and are not copied.
			_, _ = io.ReadAll(r.Body)
			if again, _ := te.take(tt.length); res < 0 && len(again) != len(body) {
				t.Errorf("the body grew after take: %d bytes, was %d", len(again), len(body))
			}
		})
	}
}

func TestCheckConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Config
		want string
	}{
		{"no cluster", Config{}, "cluster is required"},
		{"zero denominator", Config{Cluster: "c", Fraction: &Fraction{0, 0}}, "denominator"},
		{"more than one", Config{Cluster: "c", Fraction: &Fraction{3, 2}}, "more than 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &Mirror{Config: tt.c}
			if err := m.CheckConfig(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckConfig = %v, want %q", err, tt.want)
			}
		})
	}
	if err := (&Mirror{Config: Config{Cluster: "c", Fraction: &Fraction{1, 3}}}).CheckConfig(); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

func TestSettings(t *testing.T) {
	if _, err := settingsOf(map[string]string{SettingConcurrency: "0"}); err == nil {
		t.Error("concurrency 0 accepted")
	}
	if _, err := settingsOf(map[string]string{SettingTimeout: "soon"}); err == nil {
		t.Error("timeout \"soon\" accepted")
	}
	s, err := settingsOf(map[string]string{SettingQueue: "0", SettingTimeout: "2s"})
	if err != nil || s.queue != 0 || s.timeout.Seconds() != 2 || s.concurrency != DefaultConcurrency {
		t.Errorf("settings = %+v, %v", s, err)
	}
}
