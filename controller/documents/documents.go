// Package documents is the controller's fetcher of remote documents (a JWKS, say): the one
// implementation of translation.Documents, behind translation.ResolveContext.Document. Resolvers
// ask for a URI on every translation; the fetcher answers from memory at once and does the network
// work in the background, so a translation never waits on a remote server and a proxy never
// fetches anything.
//
// A URI is fetched from the first time a translation asks for it, then every refresh interval (the
// one the caller asks for, or sooner when the response's Cache-Control max-age is shorter, floored
// at MinRefresh). A failed fetch keeps the last good body and is retried with backoff. Whenever
// what Document would answer changes — a new body, the first body, the first fetch's error (or a
// different one) — OnChange is called so that the controller translates again. A URI that
// translations have stopped asking for is dropped (see Sweep).
package documents

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Defaults of Options.
const (
	DefaultMaxBytes   = 1 << 20
	DefaultTimeout    = 10 * time.Second
	DefaultMinRefresh = time.Second
	DefaultRefresh    = 5 * time.Minute
	// DefaultMaxBackoff caps the retry interval after failed fetches; a URI with a good body is
	// retried no later than its refresh interval either.
	DefaultMaxBackoff = time.Minute
	// DefaultKeepTranslations is how many consecutive translations (Sweep calls) must not have
	// asked for a URI before it may be dropped.
	DefaultKeepTranslations = 3
)

// Options configure a Fetcher; the zero value is usable.
type Options struct {
	Log *zap.Logger
	// Client sends the requests; nil is a client on a clone of http.DefaultTransport. Give one
	// with a custom transport (RootCAs, a proxy) to change how servers are reached; its Timeout
	// is left as is, and every request is bounded by Timeout besides.
	Client *http.Client
	// OnChange is called (from a fetch goroutine, never under a lock) when what Document answers
	// for some URI changed.
	OnChange func()
	// MaxBytes bounds a response body (DefaultMaxBytes); a larger one is a failed fetch.
	MaxBytes int64
	// Timeout bounds one fetch, redirects and body included (DefaultTimeout).
	Timeout time.Duration
	// MinRefresh floors every refresh interval, a caller's or a max-age (DefaultMinRefresh).
	MinRefresh time.Duration
	// MaxBackoff caps the retry interval after failures (DefaultMaxBackoff).
	MaxBackoff time.Duration
	// KeepTranslations is DefaultKeepTranslations when zero (see Sweep).
	KeepTranslations int
}

// Fetcher fetches and refreshes remote documents. Its methods are safe for concurrent use.
type Fetcher struct {
	opts   Options
	log    *zap.Logger
	client *http.Client

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	now func() time.Time // time.Now; tests move it

	mu      sync.Mutex
	entries map[string]*entry
	sweeps  int64 // Sweep calls so far
	closed  bool
	// firstDone is closed and replaced whenever a URI's first fetch completes (AwaitFirst).
	firstDone chan struct{}
}

var _ translation.Documents = (*Fetcher)(nil)

// entry is one URI. Its fields are guarded by Fetcher.mu.
type entry struct {
	uri string
	// refresh is the smallest interval a caller asked for since the previous fetch (0: none
	// asked, keep interval); interval is the one in force.
	refresh, interval time.Duration
	body              []byte
	etag              string
	err               error // the latest fetch's error, nil after a success
	attempted         bool  // a first fetch has completed, successfully or not
	usedSweep         int64 // the value of sweeps when a translation last asked for it
	usedAt            time.Time
	stop              chan struct{}
}

// New returns a fetcher; Close stops its background fetches.
func New(opts Options) *Fetcher {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MinRefresh <= 0 {
		opts.MinRefresh = DefaultMinRefresh
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.KeepTranslations <= 0 {
		opts.KeepTranslations = DefaultKeepTranslations
	}
	client := opts.Client
	if client == nil {
		client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// Follow a few redirects, and only to http(s): a document server may move its keys, but a
	// redirect loop or a scheme change is a failed fetch.
	c := *client
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 3 {
			return errors.New("stopped after 3 redirects")
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to a %s URL", req.URL.Scheme)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Fetcher{opts: opts, log: opts.Log, client: &c, ctx: ctx, cancel: cancel, now: time.Now,
		entries: map[string]*entry{}, firstDone: make(chan struct{})}
}

// ErrNotFetched is what Document returns for a URI whose first fetch has not completed.
var ErrNotFetched = errors.New("not fetched yet")

// Document implements translation.Documents: the last good body of uri, or an error saying why
// there is none (ErrNotFetched, or the failure of the fetches so far). A URI not asked for before
// is registered and its first fetch started. refresh <= 0 is DefaultRefresh.
func (f *Fetcher) Document(uri string, refresh time.Duration) ([]byte, error) {
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	refresh = max(refresh, f.opts.MinRefresh)
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.entries[uri]
	if e == nil {
		if err := checkURI(uri); err != nil {
			return nil, err
		}
		if f.closed {
			return nil, fmt.Errorf("%s: the document fetcher is stopped", uri)
		}
		e = &entry{uri: uri, interval: refresh, stop: make(chan struct{})}
		f.entries[uri] = e
		f.wg.Go(func() { f.run(e) })
	}
	e.usedSweep, e.usedAt = f.sweeps, f.now()
	if e.refresh == 0 || refresh < e.refresh {
		e.refresh = refresh
	}
	switch {
	case e.body != nil:
		return e.body, nil
	case e.err != nil:
		return nil, fmt.Errorf("fetching %s: %w", uri, e.err)
	default:
		return nil, fmt.Errorf("%s: %w", uri, ErrNotFetched)
	}
}

// checkURI accepts absolute http and https URLs with a host.
func checkURI(uri string) error {
	u, err := url.Parse(uri)
	if err != nil {
		return fmt.Errorf("document URI: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("document URI %q: only http and https are fetched", uri)
	}
	if u.Host == "" {
		return fmt.Errorf("document URI %q has no host", uri)
	}
	return nil
}

// Sweep is called once after every translation that could have asked for documents. A URI that
// none of the last KeepTranslations translations asked for, and that was last asked for more than
// twice its refresh interval ago, is dropped: both, so that neither a quiet world (no
// translations for hours) nor a busy one (many translations a second) drops a URI still in use.
func (f *Fetcher) Sweep() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweeps++
	now := f.now()
	for uri, e := range f.entries {
		if f.sweeps-e.usedSweep > int64(f.opts.KeepTranslations) && now.Sub(e.usedAt) > 2*e.interval {
			close(e.stop)
			delete(f.entries, uri)
			f.log.Debug("remote document no longer used; dropped", zap.String("uri", uri))
		}
	}
}

// AwaitFirst waits until every URI registered so far has completed a first fetch (whether it
// succeeded or not), for at most timeout. It reports whether some URI was waiting, that is,
// whether a translation made before the call could have seen ErrNotFetched and is worth
// repeating. The controller calls it before publishing, so that a new object with a remote
// document — or a new leader — does not publish a snapshot that lacks it for want of a few
// milliseconds.
func (f *Fetcher) AwaitFirst(ctx context.Context, timeout time.Duration) bool {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	waited := false
	for {
		f.mu.Lock()
		pending := false
		for _, e := range f.entries {
			if !e.attempted {
				pending = true
				break
			}
		}
		ch := f.firstDone
		f.mu.Unlock()
		if !pending {
			return waited
		}
		waited = true
		select {
		case <-ch:
		case <-timer.C:
			return true
		case <-ctx.Done():
			return true
		}
	}
}

// Close stops every background fetch and waits for them; Document fails afterwards for new URIs.
func (f *Fetcher) Close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.cancel()
	f.wg.Wait()
}

// URIs returns the URIs the fetcher holds, for tests and the admin API.
func (f *Fetcher) URIs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, 0, len(f.entries))
	for uri := range f.entries {
		out = append(out, uri)
	}
	return out
}

// run fetches e until it is dropped or the fetcher closed.
func (f *Fetcher) run(e *entry) {
	backoff := time.Duration(0)
	for {
		next, failed := f.fetchOnce(e)
		if failed {
			backoff = min(max(2*backoff, f.opts.MinRefresh), f.opts.MaxBackoff, next)
			next = backoff
		} else {
			backoff = 0
		}
		timer := time.NewTimer(next)
		select {
		case <-timer.C:
		case <-e.stop:
			timer.Stop()
			return
		case <-f.ctx.Done():
			timer.Stop()
			return
		}
	}
}

// fetchOnce fetches e once and records the outcome; it returns the interval until the next
// regular refresh and whether the fetch failed.
func (f *Fetcher) fetchOnce(e *entry) (time.Duration, bool) {
	f.mu.Lock()
	etag := e.etag
	if e.refresh > 0 {
		e.interval, e.refresh = e.refresh, 0
	}
	interval := e.interval
	f.mu.Unlock()

	body, newETag, maxAge, err := f.get(e.uri, etag)
	if f.ctx.Err() != nil {
		return 0, false // closing: the outcome is no news
	}
	if maxAge >= 0 && maxAge < interval {
		interval = max(maxAge, f.opts.MinRefresh)
	}

	f.mu.Lock()
	first := !e.attempted
	e.attempted = true
	changed := false
	switch {
	case err != nil:
		// The error shows only while there is no good body; a changed one is news then.
		changed = e.body == nil && (e.err == nil || e.err.Error() != err.Error())
		if e.body != nil {
			f.log.Warn("refreshing a remote document failed; keeping the last good one", zap.String("uri", e.uri), zap.Error(err))
		} else {
			f.log.Warn("fetching a remote document failed", zap.String("uri", e.uri), zap.Error(err))
		}
		e.err = err
	case body == nil: // 304 Not Modified
		e.err = nil
	default:
		changed = !bytes.Equal(body, e.body)
		e.body, e.etag, e.err = body, newETag, nil
		if changed {
			f.log.Info("remote document fetched", zap.String("uri", e.uri), zap.Int("bytes", len(body)), zap.Duration("refresh", interval))
		}
	}
	if first {
		close(f.firstDone)
		f.firstDone = make(chan struct{})
	}
	f.mu.Unlock()
	if changed && f.opts.OnChange != nil {
		f.opts.OnChange()
	}
	return interval, err != nil
}

// get fetches uri. body is nil on a 304 to an If-None-Match; maxAge is the response's
// Cache-Control max-age, -1 when it has none.
func (f *Fetcher) get(uri, etag string) (body []byte, newETag string, maxAge time.Duration, err error) {
	maxAge = -1
	ctx, cancel := context.WithTimeout(f.ctx, f.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, "", maxAge, err
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, "", maxAge, err
	}
	defer func() { _ = resp.Body.Close() }()
	maxAge = parseMaxAge(resp.Header.Values("Cache-Control"))
	if resp.StatusCode == http.StatusNotModified && etag != "" {
		return nil, etag, maxAge, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", maxAge, fmt.Errorf("HTTP status %s", resp.Status)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		return nil, "", maxAge, fmt.Errorf("reading the body: %w", err)
	}
	if int64(len(body)) > f.opts.MaxBytes {
		return nil, "", maxAge, fmt.Errorf("the body is larger than %d bytes", f.opts.MaxBytes)
	}
	if body == nil {
		body = []byte{}
	}
	return body, resp.Header.Get("ETag"), maxAge, nil
}

// parseMaxAge returns the max-age directive of Cache-Control values, -1 when there is none or it
// is malformed. no-store and no-cache are not read: they are about caches serving a response
// without asking, and the fetcher asks again on its own schedule anyway.
func parseMaxAge(values []string) time.Duration {
	for _, v := range values {
		for d := range strings.SplitSeq(v, ",") {
			name, val, ok := strings.Cut(strings.TrimSpace(d), "=")
			if !ok || !strings.EqualFold(name, "max-age") {
				continue
			}
			n, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64)
			if err != nil || n < 0 {
				return -1
			}
			return time.Duration(min(n, int64(365*24*3600))) * time.Second
		}
	}
	return -1
}
