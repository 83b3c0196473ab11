package standalone

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
)

// DefaultDebounce is how long the watcher waits for a burst of file events to settle: editors
// write a file in several steps (truncate, write, rename over) and a ConfigMap update swaps a
// symlink after writing a directory.
const DefaultDebounce = 100 * time.Millisecond

// Watch calls onChange once a burst of changes under path has settled for debounce, until ctx is
// done. It watches directories, not files, so a file replaced by rename (how most editors save)
// or reached through a swapped symlink (how Kubernetes updates a mounted ConfigMap) is still
// seen. For a directory it watches the whole tree and picks up new subdirectories; for a file it
// watches the file's directory and, if the file is a symlink, its target's directory. onChange
// runs on Watch's goroutine, so changes during a reload are coalesced into the next call.
func Watch(ctx context.Context, log *zap.Logger, path string, debounce time.Duration, onChange func()) error {
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", path, err)
	}
	defer func() { _ = w.Close() }()
	if err := addWatches(w, path); err != nil {
		return err
	}
	timer := time.NewTimer(debounce)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			if ev.Has(fsnotify.Create) {
				addNewDir(w, log, path, ev.Name)
			}
			timer.Reset(debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			// An overflow means events were lost: reload to be sure.
			log.Warn("file watcher error; reloading to be safe", zap.Error(err))
			timer.Reset(debounce)
		case <-timer.C:
			onChange()
		}
	}
}

// addWatches watches what Watch describes for path.
func addWatches(w *fsnotify.Watcher, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("watching %s: %w", path, err)
	}
	if st.IsDir() {
		return addTree(w, dirRoot(path), dirRoot(path))
	}
	dirs := []string{filepath.Dir(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			return fmt.Errorf("watching %s: %w", d, err)
		}
	}
	return nil
}

// addTree watches dir and every non-hidden directory below it (the ones Load reads).
func addTree(w *fsnotify.Watcher, root, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != dir && errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if err := w.Add(p); err != nil {
			return fmt.Errorf("watching %s: %w", p, err)
		}
		return nil
	})
}

// addNewDir starts watching a directory created under a watched directory tree.
func addNewDir(w *fsnotify.Watcher, log *zap.Logger, root, name string) {
	st, err := os.Lstat(name)
	if err != nil || !st.IsDir() || strings.HasPrefix(filepath.Base(name), ".") {
		return
	}
	if rst, err := os.Stat(root); err != nil || !rst.IsDir() {
		return
	}
	if err := addTree(w, dirRoot(root), name); err != nil {
		log.Warn("cannot watch new directory", zap.String("dir", name), zap.Error(err))
	}
}
