package kubelet

import (
	"bytes"
	"io"
	"strconv"
	"sync"
	"time"
)

// logLine is one line a container wrote, stamped when the kubelet read it (as the container
// runtime's log driver does).
type logLine struct {
	at   time.Time
	text []byte // without the newline
}

// logBuffer is a container's log: every line of stdout and stderr, in order, across restarts.
type logBuffer struct {
	mu    sync.Mutex
	lines []logLine
}

func newLogBuffer() *logBuffer { return &logBuffer{} }

// stream returns the writer for one of the container's output streams. Each stream keeps its own
// partial last line, so stdout and stderr lines never mix.
func (b *logBuffer) stream(string) io.Writer { return &lineWriter{buf: b} }

type lineWriter struct {
	buf     *logBuffer
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	now := time.Now()
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.partial = append(w.partial, p...)
			break
		}
		line := append(w.partial, p[:i]...)
		w.partial = nil
		w.buf.mu.Lock()
		w.buf.lines = append(w.buf.lines, logLine{at: now, text: bytes.Clone(line)})
		w.buf.mu.Unlock()
		p = p[i+1:]
	}
	return n, nil
}

// logQuery is the part of PodLogOptions the kubelet API gets as query parameters.
type logQuery struct {
	since      time.Time // zero: from the start
	tail       int       // < 0: all lines
	limit      int       // <= 0: no byte limit
	timestamps bool
}

// render writes the lines the query selects, in the kubelet's format (RFC 3339 timestamps with
// nanoseconds when asked for).
func (b *logBuffer) render(q logQuery) []byte {
	b.mu.Lock()
	lines := b.lines
	b.mu.Unlock()
	start := 0
	if !q.since.IsZero() {
		for start < len(lines) && lines[start].at.Before(q.since) {
			start++
		}
	}
	if q.tail >= 0 && len(lines)-start > q.tail {
		start = len(lines) - q.tail
	}
	var out []byte
	for _, l := range lines[start:] {
		if q.timestamps {
			out = l.at.UTC().AppendFormat(out, time.RFC3339Nano)
			out = append(out, ' ')
		}
		out = append(out, l.text...)
		out = append(out, '\n')
		if q.limit > 0 && len(out) >= q.limit {
			return out[:q.limit]
		}
	}
	return out
}

func parseLogQuery(get func(string) string, now time.Time) (logQuery, error) {
	q := logQuery{tail: -1}
	var err error
	if v := get("sinceTime"); v != "" {
		if q.since, err = time.Parse(time.RFC3339, v); err != nil {
			return q, err
		}
	}
	if v := get("sinceSeconds"); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil {
			return q, err
		}
		q.since = now.Add(-time.Duration(s) * time.Second)
	}
	if v := get("tailLines"); v != "" {
		if q.tail, err = strconv.Atoi(v); err != nil {
			return q, err
		}
	}
	if v := get("limitBytes"); v != "" {
		if q.limit, err = strconv.Atoi(v); err != nil {
			return q, err
		}
	}
	q.timestamps = get("timestamps") == "true"
	return q, nil
}
