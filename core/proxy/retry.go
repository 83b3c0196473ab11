package proxy

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/http2"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h2client"
)

// Backoff between tries (GEP-1731 leaves the curve to the implementation): the n-th retry waits
// a random time in [d/2, d] with d = base·2^(n-1), capped at maxBackoffFactor·base, so that
// clients retrying together against a recovering backend spread out.
const (
	defaultBackoff   = 25 * time.Millisecond
	maxBackoffFactor = 10
)

// retryPolicy is a route's compiled IR Retry. Nil on routes without one: their upstreams keep
// the single-try path untouched.
type retryPolicy struct {
	codes    [4]uint64 // the retried statuses (the API allows 400-599), bit status-400
	attempts int
	backoff  time.Duration
	count    *retryCounters // coxswain_proxy_retries_total of the route's object
}

func newRetryPolicy(r *irv1.Retry, count *retryCounters) *retryPolicy {
	if r == nil || r.GetAttempts() == 0 {
		return nil
	}
	p := &retryPolicy{attempts: int(r.GetAttempts()), backoff: time.Duration(r.GetBackoffMs()) * time.Millisecond, count: count}
	if p.backoff <= 0 {
		p.backoff = defaultBackoff
	}
	for _, c := range r.GetCodes() {
		p.setCode(int(c))
	}
	return p
}

func (p *retryPolicy) setCode(c int) {
	if c >= 400 && c <= 599 {
		p.codes[(c-400)/64] |= 1 << ((c - 400) % 64)
	}
}

// retriesStatus reports whether a response with this status is retried.
func (p *retryPolicy) retriesStatus(c int) bool {
	return c >= 400 && c <= 599 && p.codes[(c-400)/64]&(1<<((c-400)%64)) != 0
}

// delay is the wait before retry n (1 for the first).
func (p *retryPolicy) delay(n int) time.Duration {
	d := p.backoff
	for i := 1; i < n && d < maxBackoffFactor*p.backoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoffFactor*p.backoff)
	return d/2 + rand.N(d/2+1) //nolint:gosec // jitter, not a secret
}

// retryable reports whether r can be sent more than once at all: an Upgrade is a tunnel,
// "Expect: 100-continue" leaves the body to the upstream's decision, and trailers come after a
// body that is streamed, so these go out once.
func retryable(r *http.Request) bool {
	return len(r.Header["Upgrade"]) == 0 && len(r.Header["Expect"]) == 0 && r.Trailer == nil
}

// serveRetrying is upstream.ServeHTTP on a route with a retry policy: up to attempts+1 tries,
// each to an endpoint not tried yet when the balancer has one. A try that is not the last writes
// to a tryWriter, which holds its response back while it may still be retried; the last writes to
// the client itself. The route's request timeout (r's context) bounds the whole exchange, the
// backend timeout each try.
func (u *upstream) serveRetrying(w http.ResponseWriter, r *http.Request) {
	p := u.retry
	attempts := p.attempts
	var body *keptBody
	kept := true
	if retryable(r) {
		var err error
		if body, kept, err = keepBody(r); err != nil {
			status, msg := bodyErrorStatus(err)
			u.errw.WriteError(w, r, status, msg)
			return
		}
		if !kept {
			attempts = 0 // too large to replay: one try, counted if it fails (below)
		}
	} else {
		attempts = 0
	}
	var triedBuf, unreachableBuf [8]*core.Endpoint
	tried, unreachable := triedBuf[:0], unreachableBuf[:0]
	for n := 0; ; n++ {
		last := n == attempts
		rr := r
		if body != nil {
			rr = body.request(r)
		}
		var tw *tryWriter
		cw := w
		if !last {
			tw = newTryWriter(w, r.Context(), p)
			cw = tw
		}
		ep, out, picked := u.try(cw, rr, tried, unreachable)
		if !picked {
			return // no endpoint, or every breaker open: try answered 503
		}
		tried = append(tried, ep)
		if last {
			if !kept && out.failed() {
				p.count.inc(reasonBodyTooLarge)
			}
			if out.aborted() {
				panic(http.ErrAbortHandler)
			}
			return
		}
		reason := tw.retryReason()
		if reason == reasonNone {
			tw.commit()
			if out.aborted() {
				panic(http.ErrAbortHandler)
			}
			return
		}
		p.count.inc(reason)
		if reason == reasonConnect {
			unreachable = append(unreachable, ep)
		}
		if !sleepCtx(r.Context(), p.delay(n+1)) {
			// The route's request timeout passed during the backoff (or the client left): the
			// timeout error, as the spec says, not the held-back answer.
			if status, ok := upstreamStatus(r, r.Context().Err()); ok {
				u.errw.WriteError(w, r, status, http.StatusText(status))
			}
			return
		}
	}
}

// try is one attempt: pick an endpoint (avoiding those tried), forward under the backend
// timeout, and report the outcome to the endpoint's breaker and the balancer. picked is false
// when no endpoint could be chosen (then the answer is written).
func (u *upstream) try(w http.ResponseWriter, r *http.Request, tried, unreachable []*core.Endpoint) (ep *core.Endpoint, out outcome, picked bool) {
	ep, br, rejected := u.pickAvoiding(w, r, tried, unreachable)
	if ep == nil {
		msg := "no endpoint available"
		if rejected {
			msg = "circuit breaker open"
		}
		if tw, ok := w.(*tryWriter); ok {
			tw.commit() // a retry would change nothing: this is the answer, even if 503 is a listed code
		}
		u.errw.WriteError(w, r, http.StatusServiceUnavailable, msg)
		return nil, outcomeOK, false
	}
	if u.timeout > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), u.timeout)
		defer cancel()
		r = r.WithContext(ctx)
	}
	ep.Active.Add(1)
	defer ep.Active.Add(-1)
	out = outcomeFailed // unless the forwarder returns (see ServeHTTP)
	if fb := u.cluster.feedback; fb != nil || br != nil {
		defer report(fb, br, ep, r, time.Now(), &out)
	}
	rec := recordOf(w)
	rec.upstreamStart(u.cluster, ep.HostPort)
	out = u.fwd.forward(w, r, ep)
	rec.upstreamEnd()
	return ep, out, true
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryReason is why a try is retried (or, body_too_large, was not), the reason label of
// coxswain_proxy_retries_total.
type retryReason uint8

const (
	reasonNone           retryReason = iota
	reasonStatus                     // the upstream answered with one of the retried codes
	reasonConnect                    // the connect failed (refused, timed out, unreachable)
	reasonRefused                    // an HTTP/2 upstream refused the stream (REFUSED_STREAM: not processed)
	reasonReset                      // an idempotent request's connection closed before any answer
	reasonBackendTimeout             // the try reached the backend timeout without an answer
	reasonBodyTooLarge               // not retried: the failed try's body was too large to keep
	numReasons
)

var reasonLabels = [numReasons]string{"", "status", "connect", "refused_stream", "reset", "backend_timeout", "body_too_large"}

// failureReason says why a try that produced no response may be retried, none when it may not:
// when the whole request is over (parent: the client left or the request timeout passed), when
// a filter refused the body, or when the failure came after the upstream may have processed a
// request that is not idempotent.
func failureReason(parent context.Context, r *http.Request, err error) retryReason {
	if parent.Err() != nil || err == errClientGone { //nolint:errorlint // our own sentinel
		return reasonNone
	}
	if dl, ok := parent.Deadline(); ok && !time.Now().Before(dl) {
		return reasonNone
	}
	if _, refused := core.ErrorStatus(err); refused {
		return reasonNone
	}
	var op *net.OpError
	var se http2.StreamError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		return reasonConnect
	case errors.As(err, &se) && se.Code == http2.ErrCodeRefusedStream:
		return reasonRefused
	}
	if dl, ok := r.Context().Deadline(); ok && !time.Now().Before(dl) {
		return reasonBackendTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return reasonBackendTimeout // the engine's response-header timeout
	}
	if replayable(r) && (staleConn(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, h2client.ErrClosed) || errors.Is(err, h2client.ErrGoAway)) {
		return reasonReset
	}
	return reasonNone
}

// absorbed reports whether a forwarder's failure before the response header is held back for a
// retry instead of being answered: w is a try that is not the last (a tryWriter, maybe behind the
// stdlib path's keepHeader) and the failure is one a retry may cover.
func absorbed(w http.ResponseWriter, r *http.Request, err error) bool {
	if k, ok := w.(*keepHeader); ok {
		w = k.ResponseWriter
	}
	tw, ok := w.(*tryWriter)
	if !ok {
		return false
	}
	return tw.absorb(r, err)
}

// retryOf compiles the IR route's retry policy; nil when it retries nothing.
func (b *builder) retryOf(route string, r *irv1.Retry) (*retryPolicy, error) {
	if r.GetAttempts() == 0 {
		return nil, nil
	}
	count, err := b.p.retryCountersOf(route)
	if err != nil {
		return nil, err
	}
	return newRetryPolicy(r, count), nil
}
