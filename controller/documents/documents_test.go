package documents

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
)

// changes counts OnChange calls and lets a test await the next one.
type changes struct {
	ch chan struct{}
}

func newChanges() *changes { return &changes{ch: make(chan struct{}, 64)} }

func (c *changes) notify() { c.ch <- struct{}{} }

func (c *changes) await(t *testing.T, what string) {
	t.Helper()
	select {
	case <-c.ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no OnChange call for %s", what)
	}
}

func newFetcher(t *testing.T, srv *httptest.Server, c *changes, mod func(*Options)) *Fetcher {
	t.Helper()
	opts := Options{Log: zaptest.NewLogger(t), OnChange: c.notify, MinRefresh: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}
	if srv != nil {
		opts.Client = srv.Client()
	}
	if mod != nil {
		mod(&opts)
	}
	f := New(opts)
	t.Cleanup(f.Close)
	return f
}

// awaitBody waits until Document answers want.
func awaitBody(t *testing.T, f *Fetcher, c *changes, uri string, refresh time.Duration, want []byte) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		got, err := f.Document(uri, refresh)
		if err == nil && bytes.Equal(got, want) {
			return
		}
		select {
		case <-c.ch:
		case <-deadline:
			t.Fatalf("Document(%s) = %.60q, %v; want %.60q", uri, got, err, want)
		}
	}
}

// TestRotation: over HTTPS with the test server's own CA, the first Document of a URI is
// ErrNotFetched and starts the fetch, whose completion calls OnChange; a key rotation reaches
// Document at the next refresh (the server's max-age, shorter than the caller's hour), with
// another OnChange; an unchanged body calls none.
func TestRotation(t *testing.T) {
	k1, k2 := jwttest.NewEC("k1"), jwttest.NewEC("k2")
	srv := jwttest.NewServer(true, k1)
	defer srv.Close()
	srv.SetCacheControl("public, max-age=0")
	c := newChanges()
	f := newFetcher(t, srv.Server, c, nil)

	if _, err := f.Document(srv.JWKSURL(), time.Hour); !errors.Is(err, ErrNotFetched) {
		t.Fatalf("first Document: %v, want ErrNotFetched", err)
	}
	c.await(t, "the first fetch")
	awaitBody(t, f, c, srv.JWKSURL(), time.Hour, jwttest.JWKS(k1))

	// Several refreshes of the same body: no OnChange.
	before := srv.Hits()
	for srv.Hits() < before+3 {
		<-srv.Hit()
	}
	select {
	case <-c.ch:
		t.Fatal("OnChange for an unchanged body")
	default:
	}

	srv.Rotate(k1, k2)
	c.await(t, "the rotation")
	awaitBody(t, f, c, srv.JWKSURL(), time.Hour, jwttest.JWKS(k1, k2))
}

// TestFailedRefreshKeepsBody: once a body is good, failing refreshes keep it (and call no
// OnChange); the server's recovery with a new body is picked up.
func TestFailedRefreshKeepsBody(t *testing.T) {
	k1, k2 := jwttest.NewEC("k1"), jwttest.NewEC("k2")
	srv := jwttest.NewServer(false, k1)
	defer srv.Close()
	c := newChanges()
	f := newFetcher(t, srv.Server, c, nil)
	uri := srv.JWKSURL()
	_, _ = f.Document(uri, 5*time.Millisecond)
	c.await(t, "the first fetch")
	awaitBody(t, f, c, uri, 5*time.Millisecond, jwttest.JWKS(k1))

	srv.Fail(http.StatusInternalServerError)
	before := srv.Hits()
	for srv.Hits() < before+3 {
		<-srv.Hit()
	}
	if got, err := f.Document(uri, 5*time.Millisecond); err != nil || !bytes.Equal(got, jwttest.JWKS(k1)) {
		t.Fatalf("after failed refreshes: %.40q, %v; want the last good body", got, err)
	}
	select {
	case <-c.ch:
		t.Fatal("OnChange for a failed refresh of a good body")
	default:
	}
	srv.Rotate(k2)
	awaitBody(t, f, c, uri, 5*time.Millisecond, jwttest.JWKS(k2))
}

// TestNeverFetched: a URI whose fetches fail says why, calls OnChange when the reason first shows
// and when it changes, is retried with backoff, and is served once the server answers.
func TestNeverFetched(t *testing.T) {
	k := jwttest.NewEC("k")
	srv := jwttest.NewServer(false, k)
	defer srv.Close()
	srv.Fail(http.StatusServiceUnavailable)
	c := newChanges()
	f := newFetcher(t, srv.Server, c, nil)
	uri := srv.JWKSURL()
	_, _ = f.Document(uri, time.Hour)
	c.await(t, "the first failure")
	if _, err := f.Document(uri, time.Hour); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("Document: %v, want the 503", err)
	}
	srv.Fail(http.StatusNotFound)
	c.await(t, "a different failure")
	if _, err := f.Document(uri, time.Hour); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("Document: %v, want the 404", err)
	}
	// Retried well before the hour: backoff, not the refresh interval.
	srv.Rotate(k)
	awaitBody(t, f, c, uri, time.Hour, jwttest.JWKS(k))
}

// TestBounds: only http(s) URLs with a host, a body within MaxBytes, a fetch within Timeout.
func TestBounds(t *testing.T) {
	c := newChanges()
	for _, uri := range []string{"file:///etc/passwd", "ftp://example.com/jwks", "https:///nohost", "://"} {
		f := newFetcher(t, nil, c, nil)
		if _, err := f.Document(uri, time.Minute); err == nil || errors.Is(err, ErrNotFetched) {
			t.Errorf("Document(%q): %v, want it refused at once", uri, err)
		}
		if len(f.URIs()) != 0 {
			t.Errorf("Document(%q) registered %v", uri, f.URIs())
		}
	}

	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(bytes.Repeat([]byte("x"), 2048))
	}))
	defer big.Close()
	f := newFetcher(t, big, c, func(o *Options) { o.MaxBytes = 1024 })
	_, _ = f.Document(big.URL, time.Minute)
	c.await(t, "the oversized fetch")
	if _, err := f.Document(big.URL, time.Minute); err == nil || !strings.Contains(err.Error(), "larger than 1024") {
		t.Errorf("oversized body: %v", err)
	}

	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slow.Close()
	defer close(release)
	f = newFetcher(t, slow, c, func(o *Options) { o.Timeout = 50 * time.Millisecond })
	_, _ = f.Document(slow.URL, time.Minute)
	c.await(t, "the timed-out fetch")
	if _, err := f.Document(slow.URL, time.Minute); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("slow server: %v, want a deadline error", err)
	}
}

// TestETag: a server that answers 304 to If-None-Match keeps the body, with no OnChange.
func TestETag(t *testing.T) {
	conditional := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=0")
		if r.Header.Get("If-None-Match") == `"v1"` {
			select {
			case conditional <- struct{}{}:
			default:
			}
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write([]byte(`{"keys":[]}`))
	}))
	defer srv.Close()
	c := newChanges()
	f := newFetcher(t, srv, c, nil)
	_, _ = f.Document(srv.URL, time.Hour)
	c.await(t, "the first fetch")
	awaitBody(t, f, c, srv.URL, time.Hour, []byte(`{"keys":[]}`))
	for range 2 {
		<-conditional
	}
	if got, err := f.Document(srv.URL, time.Hour); err != nil || string(got) != `{"keys":[]}` {
		t.Fatalf("after 304s: %q, %v", got, err)
	}
	select {
	case <-c.ch:
		t.Fatal("OnChange after a 304")
	default:
	}
}

// TestSweep: a URI is dropped only when several translations in a row did not ask for it and it
// was last asked for more than twice its refresh ago.
func TestSweep(t *testing.T) {
	srv := jwttest.NewServer(false, jwttest.NewEC("k"))
	defer srv.Close()
	c := newChanges()
	f := newFetcher(t, srv.Server, c, nil)
	now := time.Now()
	f.mu.Lock()
	f.now = func() time.Time { return now }
	f.mu.Unlock()
	advance := func(d time.Duration) {
		f.mu.Lock()
		now = now.Add(d)
		f.mu.Unlock()
	}
	uri := srv.JWKSURL()
	_, _ = f.Document(uri, time.Minute)
	for range DefaultKeepTranslations + 2 {
		f.Sweep() // many translations, but within 2×refresh
	}
	if len(f.URIs()) != 1 {
		t.Fatal("dropped by translations alone")
	}
	advance(time.Hour)
	_, _ = f.Document(uri, time.Minute)
	f.Sweep()
	advance(time.Hour) // a long quiet time, but few translations
	f.Sweep()
	if len(f.URIs()) != 1 {
		t.Fatal("dropped by time alone")
	}
	for range DefaultKeepTranslations {
		f.Sweep()
	}
	if len(f.URIs()) != 0 {
		t.Fatalf("still holding %v", f.URIs())
	}
}

// TestAwaitFirst: AwaitFirst returns once the pending first fetches completed, reporting that
// there were some; with none pending it returns false at once.
func TestAwaitFirst(t *testing.T) {
	srv := jwttest.NewServer(false, jwttest.NewEC("k"))
	defer srv.Close()
	f := newFetcher(t, srv.Server, newChanges(), nil)
	if f.AwaitFirst(context.Background(), time.Second) {
		t.Error("AwaitFirst with nothing registered reported a wait")
	}
	_, _ = f.Document(srv.JWKSURL(), time.Minute)
	if !f.AwaitFirst(context.Background(), 10*time.Second) {
		t.Error("AwaitFirst after a registration reported no wait")
	}
	if _, err := f.Document(srv.JWKSURL(), time.Minute); err != nil {
		t.Errorf("after AwaitFirst: %v", err)
	}
}

func TestParseMaxAge(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"max-age=60": time.Minute, "public, MAX-AGE=\"5\"": 5 * time.Second, "no-cache": -1,
		"max-age=x": -1, "": -1, "s-maxage=9, max-age=0": 0,
	} {
		if got := parseMaxAge([]string{in}); got != want {
			t.Errorf("parseMaxAge(%q) = %v, want %v", in, got, want)
		}
	}
}
