package standalone

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// watchCounter runs Watch on path and counts onChange calls.
type watchCounter struct {
	mu sync.Mutex
	n  int
	ch chan struct{}
}

func startWatch(t *testing.T, path string) *watchCounter {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wc := &watchCounter{ch: make(chan struct{}, 100)}
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, zaptest.NewLogger(t), path, 20*time.Millisecond, func() {
			wc.mu.Lock()
			wc.n++
			wc.mu.Unlock()
			wc.ch <- struct{}{}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	})
	// Watch adds its watches before its loop; a change made before that would be missed, so wait
	// until a probe change is seen.
	probe := filepath.Join(path, ".probe")
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		probe = filepath.Join(filepath.Dir(path), ".probe")
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		must(t, os.WriteFile(probe, []byte{byte(i)}, 0o644))
		select {
		case <-wc.ch:
			must(t, os.Remove(probe))
			wc.drain()
			return wc
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("watcher never started")
		}
	}
}

// drain waits for the watcher to be quiet (a debounce interval with no call) and empties ch.
func (wc *watchCounter) drain() {
	for {
		select {
		case <-wc.ch:
		case <-time.After(200 * time.Millisecond):
			return
		}
	}
}

func (wc *watchCounter) await(t *testing.T, what string) {
	t.Helper()
	select {
	case <-wc.ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no reload after %s", what)
	}
}

func TestWatchDirectory(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.yaml": "a: 1\n"})
	wc := startWatch(t, dir)

	steps := []struct {
		name string
		do   func()
	}{
		{"in-place write", func() { must(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("a: 2\n"), 0o644)) }},
		{"rename-replace save", func() {
			tmp := filepath.Join(dir, ".a.yaml.tmp")
			must(t, os.WriteFile(tmp, []byte("a: 3\n"), 0o644))
			must(t, os.Rename(tmp, filepath.Join(dir, "a.yaml")))
		}},
		{"new subdirectory", func() { must(t, os.MkdirAll(filepath.Join(dir, "sub", "deep"), 0o755)) }},
		{"file in new subdirectory", func() {
			must(t, os.WriteFile(filepath.Join(dir, "sub", "deep", "b.yaml"), []byte("b: 1\n"), 0o644))
		}},
		{"remove", func() { must(t, os.Remove(filepath.Join(dir, "a.yaml"))) }},
	}
	for _, s := range steps {
		s.do()
		wc.await(t, s.name)
		wc.drain()
	}
}

func TestWatchSymlinkedRoot(t *testing.T) {
	dir := writeFiles(t, map[string]string{"real/a.yaml": "a: 1\n"})
	link := filepath.Join(dir, "link")
	must(t, os.Symlink("real", link))
	wc := startWatch(t, link)
	must(t, os.WriteFile(filepath.Join(dir, "real", "a.yaml"), []byte("a: 2\n"), 0o644))
	wc.await(t, "write through a symlinked root")
}

// TestWatchConfigMapSwap updates a directory the way the kubelet updates a mounted ConfigMap:
// write a new hidden directory, point ..data_tmp at it and rename it over ..data.
func TestWatchConfigMapSwap(t *testing.T) {
	dir := writeFiles(t, map[string]string{"..v1/svc.yaml": "a: 1\n", "..v2/svc.yaml": "a: 2\n"})
	must(t, os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(t, os.Symlink(filepath.Join("..data", "svc.yaml"), filepath.Join(dir, "svc.yaml")))
	for _, path := range []string{dir, filepath.Join(dir, "svc.yaml")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			wc := startWatch(t, path)
			target := "..v2"
			if b, _ := os.Readlink(filepath.Join(dir, "..data")); b == "..v2" {
				target = "..v1"
			}
			must(t, os.Symlink(target, filepath.Join(dir, "..data_tmp")))
			must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
			wc.await(t, "symlink swap")
		})
	}
}

func TestWatchDebounces(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.yaml": "a: 1\n"})
	wc := startWatch(t, dir)
	wc.mu.Lock()
	before := wc.n
	wc.mu.Unlock()
	for i := 0; i < 20; i++ {
		must(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte{'a', ':', ' ', byte('0' + i%10)}, 0o644))
	}
	wc.await(t, "burst")
	wc.drain()
	wc.mu.Lock()
	defer wc.mu.Unlock()
	// A burst written faster than the debounce interval coalesces; on a very slow machine it may
	// split, but never into one reload per write.
	if got := wc.n - before; got < 1 || got >= 20 {
		t.Errorf("burst of 20 writes caused %d reloads", got)
	}
}
