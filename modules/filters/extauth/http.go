package extauth

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coxswain-labs/coxswain/core"
)

// decision is what one check concluded.
type decision struct {
	// err is set when the auth service could not be asked or failed (failClosed applies).
	err error
	// allow lets the request through; otherwise status (0: 403), header and body are the denial.
	allow  bool
	status int
	header http.Header
	body   []byte
}

// checker asks an auth service endpoint about one request; allowing answers have already applied
// their headers to r.
type checker interface {
	check(ctx context.Context, ep *core.Endpoint, r *http.Request, f *ExternalAuth) decision
}

func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}

// httpPool is the keep-alive HTTP/1.1 connections to the endpoints of one cluster, shared by the
// tables that use it; the transport keeps idle connections per endpoint address.
type httpPool struct {
	tr *http.Transport
}

func newHTTPPool(connectTimeout time.Duration) *httpPool {
	d := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}
	return &httpPool{tr: &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true, // the client's Accept-Encoding is replayed as it is
		// No Proxy: an auth service is called directly, whatever the environment says.
	}}
}

// Close implements io.Closer: the last table using the cluster is gone.
func (p *httpPool) Close() error {
	p.tr.CloseIdleConnections()
	return nil
}

func (p *httpPool) check(ctx context.Context, ep *core.Endpoint, r *http.Request, f *ExternalAuth) decision {
	req := &http.Request{
		Method:     r.Method,
		URL:        &url.URL{Scheme: "http", Host: ep.HostPort, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Host:       r.Host,
		Header:     make(http.Header, len(r.Header)+3),
	}
	req = req.WithContext(ctx)
	for k, vv := range r.Header {
		if hopHeader(k) || k == "Content-Length" || k == "Expect" || k == "X-Forwarded-For" ||
			k == "X-Forwarded-Host" || k == "X-Forwarded-Proto" {
			continue
		}
		req.Header[k] = vv
	}
	setForwarded(req.Header, r)
	resp, err := p.tr.RoundTrip(req)
	if err != nil {
		return decision{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		_, _ = io.CopyN(io.Discard, resp.Body, MaxDeniedBody)
		return decision{err: fmt.Errorf("auth service answered %s", resp.Status)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		for _, k := range f.allowed {
			if vv, ok := resp.Header[k]; ok {
				r.Header[k] = vv
			}
		}
		// Drain what is small so the connection goes back to the pool.
		_, _ = io.CopyN(io.Discard, resp.Body, MaxDeniedBody)
		return decision{allow: true}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDeniedBody))
	if err != nil {
		return decision{err: fmt.Errorf("reading the auth service's denial: %w", err)}
	}
	return decision{status: resp.StatusCode, header: resp.Header, body: body}
}

// setForwarded sets X-Forwarded-For (the client's chain plus the connection's peer: the resolved
// client changes decisions, not the chain), -Host and -Proto on h, as the engine does for an
// upstream.
func setForwarded(h http.Header, r *http.Request) {
	xff := ""
	for _, prior := range r.Header["X-Forwarded-For"] {
		xff += prior + ", "
	}
	if ap := core.PeerAddr(r); ap.IsValid() {
		xff += ap.Addr().String()
	}
	if xff = strings.TrimSuffix(xff, ", "); xff != "" {
		h["X-Forwarded-For"] = []string{xff}
	}
	h["X-Forwarded-Host"] = []string{r.Host}
	if r.TLS != nil {
		h["X-Forwarded-Proto"] = []string{"https"}
	} else {
		h["X-Forwarded-Proto"] = []string{"http"}
	}
}
