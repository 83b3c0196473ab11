package proxy

import (
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// forwarder sends a request to a chosen endpoint and copies the response back. It is an interface
// so the stdlib reverse proxy behind it can be replaced by a leaner one without touching routing.
type forwarder interface {
	forward(w http.ResponseWriter, r *http.Request, ep *core.Endpoint)
}

// forwarders makes forwarders that share the proxy's upstream connection pools, which therefore
// survive table swaps: a new snapshot does not reopen upstream connections.
type forwarders struct {
	log    *zap.Logger
	stdlog *log.Logger // ReverseProxy's own log lines (body copy errors), shared by all forwarders
	h1     *http.Transport
	h2c    *http.Transport
	pool   *bufferPool
	pools  *h1Pools      // the HTTP/1.1 fast path's connections
	rht    time.Duration // upstream response header timeout
}

func newForwarders(log *zap.Logger, l Limits) *forwarders {
	return &forwarders{
		log:    log,
		stdlog: zap.NewStdLog(log.Named("forward")),
		h1:     newTransport(l, false),
		h2c:    newTransport(l, true),
		pool:   &bufferPool{},
		pools:  newH1Pools(l),
		rht:    Positive(l.UpstreamResponseHeaderTimeout),
	}
}

// newTransport is the upstream transport, tuned for a gateway: a deep keep-alive pool per endpoint,
// bounded dials and response-header waits, no environment proxy, and no transparent compression
// (bytes pass through as the endpoint sent them).
func newTransport(l Limits, h2c bool) *http.Transport {
	d := &net.Dialer{Timeout: Positive(l.UpstreamDialTimeout), KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConnsPerHost:   l.UpstreamMaxIdleConnsPerHost,
		IdleConnTimeout:       Positive(l.UpstreamIdleConnTimeout),
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
	var p http.Protocols
	if h2c {
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
	f.h1.CloseIdleConnections()
	f.h2c.CloseIdleConnections()
	f.pools.closeAll()
}

// newForwarder returns the forwarder of one backend: cl's transport, the backend's response filters
// and its route's error writer. HTTP/1.1 clusters get the fast path (forward_h1.go) in front of the
// stdlib reverse proxy, which keeps what the fast path leaves to it.
func (f *forwarders) newForwarder(cl *cluster, resp []core.HTTPResponseFilter, errw core.HTTPErrorWriter) forwarder {
	if cl.protocol != irv1.Cluster_HTTP1 {
		return f.reverseProxy(cl, resp, errw)
	}
	fw := &h1Forwarder{resp: resp, errw: errw, log: f.log, rht: f.rht,
		newFallback: func() *reverseProxy { return f.reverseProxy(cl, resp, errw) }}
	// Most clusters have one endpoint: no map for them (a table of 10,000 routes has as many
	// forwarders).
	if len(cl.eps) == 1 {
		fw.ep, fw.pool = cl.eps[0], f.pools.pool(cl.eps[0].HostPort)
		return fw
	}
	fw.pools = make(map[*core.Endpoint]*h1Pool, len(cl.eps))
	for _, ep := range cl.eps {
		fw.pools[ep] = f.pools.pool(ep.HostPort)
	}
	return fw
}

func (f *forwarders) reverseProxy(cl *cluster, resp []core.HTTPResponseFilter, errw core.HTTPErrorWriter) *reverseProxy {
	rp := &reverseProxy{log: f.log, errw: errw}
	rp.rp = httputil.ReverseProxy{
		Rewrite:      rewrite,
		Transport:    f.h1,
		BufferPool:   f.pool,
		ErrorHandler: rp.handleError,
		ErrorLog:     f.stdlog,
	}
	if cl.protocol == irv1.Cluster_H2C {
		rp.rp.Transport = f.h2c
	}
	if len(resp) > 0 {
		rp.rp.ModifyResponse = func(res *http.Response) error {
			for _, fl := range resp {
				fl.FilterResponse(res.Request, res.StatusCode, res.Header)
			}
			return nil
		}
	}
	return rp
}

// reverseProxy is the forwarder on httputil.ReverseProxy, which handles hop-by-hop headers, Upgrade
// (WebSocket) tunnels, trailers, 1xx responses and immediate flushing of streamed responses (SSE,
// unknown length, so gRPC too).
type reverseProxy struct {
	rp   httputil.ReverseProxy
	log  *zap.Logger
	errw core.HTTPErrorWriter
}

// forward points r at ep for the duration of the call: ReverseProxy clones r (URL included) before
// Rewrite, so setting the target on r and restoring it afterwards costs no allocation and leaves r
// as the filters left it.
func (f *reverseProxy) forward(w http.ResponseWriter, r *http.Request, ep *core.Endpoint) {
	scheme, host := r.URL.Scheme, r.URL.Host
	r.URL.Scheme, r.URL.Host = "http", ep.HostPort
	defer func() { r.URL.Scheme, r.URL.Host = scheme, host }()
	f.rp.ServeHTTP(w, r)
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

// handleError maps an upstream failure to a status: a deadline (route or backend timeout, or the
// transport's response-header timeout) is 504, anything else (refused, reset, DNS) is 502.
func (f *reverseProxy) handleError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadGateway
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.Is(r.Context().Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		status = http.StatusGatewayTimeout
	case errors.As(err, &op) && op.Op == "dial":
	case errors.As(err, &ne) && ne.Timeout():
		status = http.StatusGatewayTimeout
	}
	if r.Context().Err() != nil && !errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		// The client went away; nobody reads the answer.
		f.log.Debug("client canceled", zap.String("host", r.Host), zap.Error(err))
		return
	}
	f.log.Debug("upstream error", zap.String("host", r.Host), zap.String("upstream", r.URL.Host),
		zap.Int("status", status), zap.Error(err))
	f.errw.WriteError(w, r, status, http.StatusText(status))
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
