// Package browser runs a real headless Chromium for tests, driven with chromedp, and saves what
// it shows as test artifacts. Tests that use it skip when no Chromium is installed, unless
// COXSWAIN_REQUIRE_CHROMIUM is set (CI sets it), in which case they fail: a missing browser must
// never pass silently where it is expected.
//
// Screenshots go to $COXSWAIN_ARTIFACTS/<test name>/ when that is set, else to the test's
// t.ArtifactDir() (kept under the package's _artifacts/ with `go test -artifacts`, removed
// otherwise).
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Candidates are the names Debian's `chromium` package and others install the browser under.
var candidates = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Path finds the Chromium binary: $COXSWAIN_CHROMIUM, else the first candidate on $PATH.
func Path() (string, error) {
	if p := os.Getenv("COXSWAIN_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium on $PATH (tried %s); install it with `make test-deps` (Debian packages chromium and chromium-driver) or set COXSWAIN_CHROMIUM", strings.Join(candidates, ", "))
}

// Options are a browser's window.
type Options struct {
	Width, Height int
}

// New starts a headless Chromium with a fresh profile and returns a tab's context; everything
// stops when the test ends.
func New(t testing.TB, o Options) context.Context {
	t.Helper()
	path, err := Path()
	if err != nil {
		if os.Getenv("COXSWAIN_REQUIRE_CHROMIUM") != "" {
			t.Fatalf("COXSWAIN_REQUIRE_CHROMIUM is set: %v", err)
		}
		t.Skipf("skipping the browser test: %v (set COXSWAIN_REQUIRE_CHROMIUM=1 to make this a failure)", err)
	}
	if o.Width == 0 {
		o.Width, o.Height = 1280, 900
	}
	// The flags keep Chromium off the network (the tests' network is closed) and out of any
	// state left by another run.
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(o.Width, o.Height),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
	})
	// The first action starts the browser, which lives as long as this (timeout-free) context.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// ArtifactDir is where the test's screenshots go (see the package comment).
func ArtifactDir(t testing.TB) string {
	t.Helper()
	base := os.Getenv("COXSWAIN_ARTIFACTS")
	if base == "" {
		return t.ArtifactDir()
	}
	dir := filepath.Join(base, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Screenshot saves the whole page (not just the window) as <name>.png in the artifact directory.
func Screenshot(t testing.TB, ctx context.Context, name string) string {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(ArtifactDir(t), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	return p
}

// WaitFor polls the page until the JavaScript expression js is true, or the context ends; the
// error then says what was awaited.
func WaitFor(ctx context.Context, what, js string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(within))); err != nil {
		return fmt.Errorf("waiting %s for %s (%s): %w", within, what, js, err)
	}
	return nil
}
