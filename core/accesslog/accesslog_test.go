package accesslog

import (
	"bytes"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

type buf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// TestSampleAndClose logs 9 requests at 1 in 3: Close writes the 3 sampled lines, each a JSON
// object with the time, message and fields; a line after Close is dropped.
func TestSampleAndClose(t *testing.T) {
	var out buf
	l := New(Options{Sink: &out, Sample: 3})
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for i := range 9 {
		if !l.Sampled() {
			continue
		}
		fs := l.Get()
		fs.Add(zap.Int("n", i))
		l.Write(at, "request", fs)
	}
	l.Close(nil)
	fs := l.Get()
	l.Write(at, "late", fs)
	lines := bytes.Split(bytes.TrimSpace(out.b.Bytes()), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.b.String())
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if m["msg"] != "request" || m["time"] != "2026-12-02T12:00:00Z" || m["n"] != float64(3*i+2) {
			t.Errorf("line %d: %v", i, m)
		}
	}
}

// TestNilLogger: a nil *Logger logs nothing and never panics.
func TestNilLogger(t *testing.T) {
	var l *Logger
	if l.Sampled() || l.Query() {
		t.Fatal("a nil logger samples")
	}
	l.Close(nil)
}
