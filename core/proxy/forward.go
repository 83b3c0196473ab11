package proxy

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h2client"
)

// forwarder sends a request to a chosen endpoint and copies the response back. It is an interface
// so the stdlib reverse proxy behind it can be replaced by a leaner one without touching routing.
type forwarder interface {
	forward(w http.ResponseWriter, r *http.Request, ep *core.Endpoint) outcome
}

// outcome is how one exchange with an upstream endpoint ended, for its circuit breaker and the
// cluster's balancer (core.BalancerFeedback).
type outcome uint8

const (
	// outcomeOK: the endpoint answered below 500, or the exchange ended for a reason that is not
	// the endpoint's fault (the client went away, a filter refused the request body).
	outcomeOK outcome = iota
	// outcome5xx: the endpoint answered with a 5xx status.
	outcome5xx
	// outcomeFailed: no usable answer: the connect failed or timed out, the request timed out,
	// the connection was reset, the response was malformed or its body broke off.
	outcomeFailed

	// outcomeAborted is set besides one of the above when the client's response must be cut off
	// (its header went out, its body cannot be completed). The forwarder returns instead of
	// panicking with http.ErrAbortHandler itself, so that the outcome is known: upstream.ServeHTTP
	// panics once it has it.
	outcomeAborted outcome = 1 << 7
)

// failed reports whether the outcome counts against the endpoint.
func (o outcome) failed() bool { return o&^outcomeAborted != outcomeOK }

// aborted reports whether the client's response is to be aborted.
func (o outcome) aborted() bool { return o&outcomeAborted != 0 }

// statusOutcome is the outcome of an answer with the given status.
func statusOutcome(status int) outcome {
	if status >= http.StatusInternalServerError {
		return outcome5xx
	}
	return outcomeOK
}

// errOutcome is the outcome of an exchange that ended with err: not the endpoint's fault when the
// client went away or a filter refused the request body (upstreamStatus), failed otherwise.
func errOutcome(r *http.Request, err error) outcome {
	if _, ok := upstreamStatus(r, err); !ok {
		return outcomeOK
	}
	if _, refused := core.ErrorStatus(err); refused {
		return outcomeOK
	}
	return outcomeFailed
}

// forwarders makes forwarders that share the proxy's upstream connection pools, which therefore
// survive table swaps: a new snapshot does not reopen upstream connections.
type forwarders struct {
	log        *zap.Logger
	stdlog     *log.Logger // ReverseProxy's own log lines (body copy errors), shared by all forwarders
	defaults   connPolicy  // of a cluster that sets no timeouts
	transports *transports // the stdlib reverse proxy's
	pool       *bufferPool
	pools      *h1Pools                 // the HTTP/1.1 fast path's connections
	h2cp       *h2client.Pools[poolKey] // the h2c clusters' connections (forward_h2c.go)
	rht        time.Duration            // upstream response header timeout
}

func newForwarders(log *zap.Logger, l Limits) *forwarders {
	return &forwarders{
		log:        log,
		stdlog:     zap.NewStdLog(log.Named("forward")),
		defaults:   defaultPolicy(l),
		transports: newTransports(l),
		pool:       &bufferPool{},
		pools:      newH1Pools(l),
		h2cp:       h2client.NewPools[poolKey](0),
		rht:        Positive(l.UpstreamResponseHeaderTimeout),
	}
}

// newTransport is an upstream transport, tuned for a gateway: a deep keep-alive pool per endpoint,
// dials bounded by the policy's connect timeout, idle connections closed after its idle timeout,
// bounded response-header waits, no environment proxy, and no transparent compression (bytes pass
// through as the endpoint sent them).
func newTransport(l Limits, pol connPolicy, h2c bool) *http.Transport {
	t := &http.Transport{
		DialContext:           pol.dialer().DialContext,
		DialTLSContext:        pol.dialTLS(),
		MaxIdleConnsPerHost:   l.UpstreamMaxIdleConnsPerHost,
		IdleConnTimeout:       pol.idle,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
	var p http.Protocols
	if h2c && pol.tls != nil {
		p.SetHTTP2(true) // HTTP/2 over TLS, agreed by ALPN
	} else if h2c {
		// Cleartext HTTP/2 with prior knowledge (appProtocol kubernetes.io/h2c, gRPC). No
		// response-header timeout: a gRPC server may send its header only with its first message,
		// which a watch or a quiet stream sends whenever it has one. The route's timeouts, and the
		// client's own grpc-timeout at the backend, bound such calls instead.
		p.SetUnencryptedHTTP2(true)
	} else {
		t.ResponseHeaderTimeout = Positive(l.UpstreamResponseHeaderTimeout)
		p.SetHTTP1(true)
	}
	t.Protocols = &p
	return t
}

func (f *forwarders) closeIdle() {
	f.transports.closeIdle()
	f.pools.closeAll()
	f.h2cp.CloseIdle()
}

// sweep drops the pools and transports no build or in-place update asked for since the last sweep.
func (f *forwarders) sweep() {
	f.pools.sweep()
	f.transports.sweep()
}

// newForwarder returns the forwarder of one backend: cl's transport, the backend's response filters
// and its route's error writer. HTTP/1.1 clusters get the fast path (forward_h1.go) in front of the
// stdlib reverse proxy, which keeps what the fast path leaves to it. h2c clusters get the engine's
// own HTTP/2 client (forward_h2c.go).
func (f *forwarders) newForwarder(cl *cluster, resp []core.HTTPResponseFilter, errw core.HTTPErrorWriter) forwarder {
	if cl.protocol == irv1.Cluster_H2C {
		return f.newH2CForwarder(cl, resp, errw)
	}
	if cl.protocol != irv1.Cluster_HTTP1 {
		return f.reverseProxy(cl, resp, errw)
	}
	return &h1Forwarder{fwds: f, cl: cl, resp: resp, errw: errw, rht: f.rht}
}

func (f *forwarders) reverseProxy(cl *cluster, resp []core.HTTPResponseFilter, errw core.HTTPErrorWriter) *reverseProxy {
	rp := &reverseProxy{log: f.log, errw: errw, resp: resp, cluster: cl.name, scheme: "http"}
	if cl.conn.tls != nil {
		rp.scheme = "https" // the transport's DialTLSContext runs the cluster's handshake
	}
	rp.rp = httputil.ReverseProxy{
		Rewrite:        rewrite,
		Transport:      cl.transport,
		BufferPool:     f.pool,
		ErrorHandler:   rp.handleError,
		ErrorLog:       f.stdlog,
		ModifyResponse: rp.modifyResponse,
	}
	rp.trailers, _ = errw.(core.HTTPTrailerErrorWriter)
	return rp
}

// reverseProxy is the forwarder on httputil.ReverseProxy, which handles hop-by-hop headers, Upgrade
// (WebSocket) tunnels, trailers, 1xx responses and immediate flushing of streamed responses (SSE,
// unknown length, so gRPC too).
type reverseProxy struct {
	rp   httputil.ReverseProxy
	log  *zap.Logger
	errw core.HTTPErrorWriter
	resp []core.HTTPResponseFilter
	// trailers is errw when it can report a failure after the response header (gRPC).
	trailers core.HTTPTrailerErrorWriter
	cluster  string
	scheme   string // of the outbound URL: "https" for a TLS cluster
}

// rpExchange is the per-request state of the reverse proxy path: how the exchange went, which
// ReverseProxy's callbacks (modifyResponse, handleError, the response body) learn and forward
// returns. They reach it through the request's context: three allocations per request (the
// state, the context and the request copy), on a path that clones the request anyway.
type rpExchange struct{ out outcome }

type rpExchangeKey struct{}

func exchangeOf(r *http.Request) *rpExchange {
	if x, ok := r.Context().Value(rpExchangeKey{}).(*rpExchange); ok {
		return x
	}
	return &rpExchange{} // not through forward: nobody reads it
}

// forward points r at ep for the duration of the call: ReverseProxy clones r (URL included) before
// Rewrite, so setting the target on r and restoring it afterwards leaves r as the filters left it.
// Fields already in w's header (session persistence's Set-Cookie) are kept through interim
// responses (keepHeader).
func (f *reverseProxy) forward(w http.ResponseWriter, r *http.Request, ep *core.Endpoint) (out outcome) {
	x := &rpExchange{}
	scheme, host := r.URL.Scheme, r.URL.Host
	r.URL.Scheme, r.URL.Host = f.scheme, ep.HostPort
	defer func() { r.URL.Scheme, r.URL.Host = scheme, host }()
	if h := w.Header(); len(h) > 0 {
		w = &keepHeader{ResponseWriter: w, pre: h.Clone()}
	}
	defer func() {
		// ReverseProxy aborts a response whose body it could not copy with http.ErrAbortHandler:
		// return that as an outcome, which the caller records before it aborts. Any other panic
		// goes on from here, before the stack unwinds, so its trace still shows where it came from.
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler { //nolint:errorlint // the panic value is the sentinel itself
				panic(v)
			}
			out = x.out | outcomeAborted
		}
	}()
	f.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), rpExchangeKey{}, x)))
	return x.out
}

// modifyResponse notes a 5xx, runs the response filters and watches the body for a failure
// mid-stream. A 101's body is the upgraded connection, which ReverseProxy needs unwrapped.
func (f *reverseProxy) modifyResponse(res *http.Response) error {
	x := exchangeOf(res.Request)
	x.out = statusOutcome(res.StatusCode)
	for _, fl := range f.resp {
		fl.FilterResponse(res.Request, res.StatusCode, res.Header)
	}
	if res.StatusCode != http.StatusSwitchingProtocols && res.Body != nil && res.Body != http.NoBody {
		res.Body = &upstreamBody{ReadCloser: res.Body, res: res, rp: f, x: x}
	}
	return nil
}

// keepHeader is the client's writer on the stdlib path when the engine set response fields
// before forwarding. ReverseProxy relays an interim (1xx) response of the backend by adding its
// fields to the writer's header, writing it, and clearing the header, so those fields would go
// out on the interim response and miss the final one. keepHeader takes them out of the first
// interim response and puts them back in front of the final one's (each only if they are there,
// resp. missing, so it does not depend on ReverseProxy clearing).
type keepHeader struct {
	http.ResponseWriter
	pre      http.Header // the fields set before forwarding (a copy)
	restored bool
}

func (k *keepHeader) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		h := k.Header()
		for key, vv := range k.pre {
			if cur := h[key]; hasPrefix(cur, vv) {
				if len(cur) == len(vv) {
					delete(h, key)
				} else {
					h[key] = cur[len(vv):]
				}
			}
		}
		k.ResponseWriter.WriteHeader(code)
		return
	}
	k.restore()
	k.ResponseWriter.WriteHeader(code)
}

func (k *keepHeader) Write(b []byte) (int, error) {
	k.restore()
	return k.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (ReverseProxy's flushes and Upgrade hijack) reach the
// client's writer.
func (k *keepHeader) Unwrap() http.ResponseWriter { return k.ResponseWriter }

func (k *keepHeader) restore() {
	if k.restored {
		return
	}
	k.restored = true
	h := k.Header()
	for key, vv := range k.pre {
		if cur := h[key]; !hasPrefix(cur, vv) {
			h[key] = append(vv[:len(vv):len(vv)], cur...)
		}
	}
}

// hasPrefix reports whether the field values vv start with pre.
func hasPrefix(vv, pre []string) bool {
	return len(vv) >= len(pre) && slices.Equal(vv[:len(pre)], pre)
}

// rewrite keeps the client's Host header (the outbound URL already targets the endpoint) and sets
// X-Forwarded-Host and -Proto. X-Forwarded-For gets the client's address appended to whatever chain
// the client sent, as Envoy and nginx do: backends that trust N hops read the N-th from the right.
//
// An "Upgrade: h2c" request is forwarded as a plain request: tunnelling it would let a client speak
// HTTP/2 straight to the backend past every later routing decision and filter (h2c smuggling).
func rewrite(pr *httputil.ProxyRequest) {
	if xff, ok := pr.In.Header["X-Forwarded-For"]; ok {
		pr.Out.Header["X-Forwarded-For"] = xff
	}
	if up := pr.Out.Header["Upgrade"]; len(up) > 0 && strings.EqualFold(up[0], "h2c") {
		pr.Out.Header.Del("Upgrade")
		pr.Out.Header.Del("Connection")
	}
	pr.SetXForwarded()
}

// handleError answers an upstream failure that came before the response header, unless a retry
// takes it (absorbed).
func (f *reverseProxy) handleError(w http.ResponseWriter, r *http.Request, err error) {
	exchangeOf(r).out = errOutcome(r, err)
	countUpstreamError(w, r, err)
	if absorbed(w, r, err) {
		return
	}
	status, ok := upstreamStatus(r, err)
	if !ok {
		// The client went away; nobody reads the answer.
		f.log.Debug("client canceled", zap.String("host", r.Host), zap.Error(err))
		return
	}
	logUpstreamError(f.log, f.cluster, r, r.URL.Host, status, err)
	f.errw.WriteError(w, r, status, http.StatusText(status))
}

// upstreamStatus maps an upstream failure to a status: past the request's deadline (route or
// backend timeout, or the client's own gRPC deadline) it is 504, whatever the error says: a
// backend that gave up at the same deadline (a gRPC server resets the stream with CANCEL) may
// report it before the engine's own timer fires. A connect that failed before the deadline is
// 502, timed out (the cluster's connect timeout) or refused; an I/O timeout is 504; anything else
// (reset, connection lost) is 502. An error from reading the request body that is a
// core.StatusError (a filter's size limit) is that status. ok is false when the client canceled
// (or the own server's client watch saw it go: errClientGone).
func upstreamStatus(r *http.Request, err error) (status int, ok bool) {
	ctx := r.Context()
	if cerr := ctx.Err(); (cerr != nil && !errors.Is(cerr, context.DeadlineExceeded)) || err == errClientGone { //nolint:errorlint // our own sentinel, never wrapped
		return 0, false
	}
	if st, isStatus := core.ErrorStatus(err); isStatus {
		// A filter's request-body reader refused the body (core.StatusError): its status, not
		// the upstream's fault.
		return st, true
	}
	if dl, set := ctx.Deadline(); set && !time.Now().Before(dl) {
		return http.StatusGatewayTimeout, true
	}
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Op == "dial":
		// Refused, or the cluster's connect timeout (which a net.Dialer reports as a
		// DeadlineExceeded too) before the request's deadline.
		return http.StatusBadGateway, true
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, true
	case errors.As(err, &ne) && ne.Timeout():
		return http.StatusGatewayTimeout, true
	}
	return http.StatusBadGateway, true
}

// upstreamBody is an upstream response body that records a failure mid-stream in the exchange's
// outcome. With a route whose error writer can (core.HTTPTrailerErrorWriter, gRPC), the failure
// becomes trailers and a normal end of the body, so ReverseProxy sends them instead of aborting the
// client's stream.
type upstreamBody struct {
	io.ReadCloser
	res *http.Response
	rp  *reverseProxy
	x   *rpExchange
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == nil || errors.Is(err, io.EOF) {
		return n, err
	}
	r := b.res.Request
	if o := errOutcome(r, err); o.failed() {
		b.x.out = o
	}
	status, ok := upstreamStatus(r, err)
	if !ok || b.rp.trailers == nil {
		return n, err // the client is gone, or nothing to say it with: abort
	}
	b.rp.log.Debug("upstream error mid-stream", zap.String("host", r.Host), zap.String("upstream", r.URL.Host),
		zap.Int("status", status), zap.Error(err))
	if b.res.Trailer == nil {
		b.res.Trailer = http.Header{}
	}
	b.rp.trailers.WriteTrailerError(b.res.Trailer, r, status, http.StatusText(status))
	return n, io.EOF
}

// bufferPool recycles the 32 KiB copy buffers of response bodies.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) {
	if cap(buf) == 32<<10 {
		b.p.Put(&buf)
	}
}
