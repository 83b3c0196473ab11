package env

import (
	"io"
	"sync"
)

// tail keeps the last max bytes written to it: the control-plane output a
// failing test prints, without holding a whole apiserver log in memory.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

var _ io.Writer = (*tail)(nil)

func newTail(max int) *tail { return &tail{max: max} }

// Write is called from the goroutines copying each process's stdout and
// stderr, hence the lock.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
