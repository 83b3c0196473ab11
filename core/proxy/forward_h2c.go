package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/proxy/internal/h2client"
)

// h2cForwarder forwards to an h2c cluster (cleartext HTTP/2 with prior knowledge: appProtocol
// kubernetes.io/h2c, gRPC) over the engine's own HTTP/2 client (internal/h2client) instead of
// httputil.ReverseProxy and http.Transport. Compared with them it makes no clone of the request
// and no copy of the response header, sends a request whose body has arrived whole (a unary gRPC
// call) from the handler's goroutine with its header, runs a goroutine only to stream a body
// still arriving, and flushes the client's response only when no more of it is already buffered
// (so a unary gRPC response, whose header, message and trailers arrive together, is not flushed
// in three pieces), while a stream's messages still leave as soon as they arrive.
//
// Upgrade requests (which HTTP/2 cannot carry this way) keep to the stdlib reverse proxy.
type h2cForwarder struct {
	fwds     *forwarders
	cl       *cluster // its endpoint set has the endpoints' pools
	resp     []core.HTTPResponseFilter
	errw     core.HTTPErrorWriter
	terrw    core.HTTPTrailerErrorWriter // errw, when it can report failures in trailers (gRPC)
	fallback atomic.Pointer[reverseProxy]
}

var _ forwarder = (*h2cForwarder)(nil)

// h2cPool is the pool of the h2c connections to addr under pol.
func (f *forwarders) h2cPool(addr string, pol connPolicy) *h2client.Pool {
	return f.h2cp.Pool(poolKey{addr: addr, pol: pol}, addr, pol.dial, pol.idle)
}

// scheme is the :scheme of the upstream request: "https" when the cluster's connections are TLS.
func (f *h2cForwarder) scheme() string {
	if f.cl.conn.tls != nil {
		return "https"
	}
	return "http"
}

func (f *forwarders) newH2CForwarder(cl *cluster, resp []core.HTTPResponseFilter, errw core.HTTPErrorWriter) *h2cForwarder {
	fw := &h2cForwarder{fwds: f, cl: cl, resp: resp, errw: errw}
	fw.terrw, _ = errw.(core.HTTPTrailerErrorWriter)
	return fw
}

func (f *h2cForwarder) slowPath() *reverseProxy {
	if rp := f.fallback.Load(); rp != nil {
		return rp
	}
	rp := f.fwds.reverseProxy(f.cl, f.resp, f.errw)
	f.fallback.CompareAndSwap(nil, rp)
	return f.fallback.Load()
}

func (f *h2cForwarder) forward(w http.ResponseWriter, r *http.Request, ep *core.Endpoint) outcome {
	pool := f.cl.set.Load().h2cPool(ep)
	if pool == nil || r.Header["Upgrade"] != nil {
		return f.slowPath().forward(w, r, ep)
	}
	ctx := r.Context()
	s, err := f.open(r, pool)
	if err != nil {
		return f.fail(w, r, ep, err)
	}
	defer s.Finish()
	if err := s.AwaitHeader(ctx.Done()); err != nil {
		return f.fail(w, r, ep, err)
	}
	// The upstream's fields go straight into the client's header map, where the response
	// filters see them (read-only once the header arrived).
	h := w.Header()
	h2client.AddFields(h, s.Header(), sameKey)
	for _, k := range h2cHopByHop {
		delete(h, k)
	}
	status := s.Status()
	for _, fl := range f.resp {
		fl.FilterResponse(r, status, h)
	}
	w.WriteHeader(status)
	return f.copyBody(w, r, ep, s, statusOutcome(status))
}

// wholeBody is a request body that can tell, without blocking, that all of it has arrived: the
// own HTTP/2 server's (h2server), once the client's END_STREAM came without trailers.
type wholeBody interface {
	Whole() (n int, ok bool)
}

// maxInlineBody is the largest whole request body sent with the request's header, from the
// handler's goroutine (a unary gRPC request, an API call); larger or unfinished ones stream
// from a goroutine of their own.
const maxInlineBody = 16 << 10

// open opens the upstream stream. A request without a body, or whose body is all there, goes
// with its header in one step (one write while the connection carries nothing else); any other
// body is sent by a goroutine of its own as it arrives.
func (f *h2cForwarder) open(r *http.Request, pool *h2client.Pool) (*h2client.Stream, error) {
	fields := func(add func(string, string)) { requestFields(r, f.scheme(), add) }
	if r.Body == nil || r.Body == http.NoBody {
		return pool.Open(r.Context(), fields, nil, true)
	}
	// Trailers (announced, or already read by a filter that drained the body) stream with it.
	if wb, ok := r.Body.(wholeBody); ok && len(r.Trailer) == 0 {
		if n, whole := wb.Whole(); whole && n <= maxInlineBody {
			bp := inlineBodies.Get().(*[]byte)
			defer inlineBodies.Put(bp)
			body, err := readWhole(r.Body, (*bp)[:0], n)
			if err != nil {
				return nil, err
			}
			return pool.Open(r.Context(), fields, body, true)
		}
	}
	s, err := pool.Open(r.Context(), fields, nil, false)
	if err != nil {
		return nil, err
	}
	go s.SendBody(r.Body, func() http.Header { return r.Trailer })
	return s, nil
}

var inlineBodies = sync.Pool{New: func() any { b := make([]byte, 0, maxInlineBody); return &b }}

// readWhole reads the n bytes of a body that Whole reported complete (the reads do not block)
// into buf, to its EOF.
func readWhole(body io.Reader, buf []byte, n int) ([]byte, error) {
	buf = slices.Grow(buf, n)[:n]
	if _, err := io.ReadFull(body, buf); err != nil {
		return nil, err
	}
	var one [1]byte
	if k, err := body.Read(one[:]); k != 0 || err != io.EOF { //nolint:errorlint // the sentinel itself
		return nil, fmt.Errorf("h2c: request body longer than announced (%w)", err)
	}
	return buf, nil
}

// copyBody copies the response body as it arrives, flushing whenever nothing more is buffered,
// then the trailers. out is the outcome so far (the status's); a client that cannot be written to
// ends the copy without changing it.
func (f *h2cForwarder) copyBody(w http.ResponseWriter, r *http.Request, ep *core.Endpoint, s *h2client.Stream, out outcome) outcome {
	done := r.Context().Done()
	var rc *http.ResponseController
	// The header goes out on its own only if nothing follows it yet (a stream that answers
	// before its first message); else with the first bytes of the body.
	if !s.More() {
		rc = http.NewResponseController(w)
		if rc.Flush() != nil {
			return out
		}
	}
	for {
		p, end, err := s.Next(done)
		if len(p) > 0 {
			_, werr := w.Write(p)
			s.Consumed(p)
			if werr != nil {
				return out // the client is gone; finish resets the upstream stream
			}
		}
		if err != nil {
			return f.failMidStream(w, r, ep, err)
		}
		if end {
			break
		}
		if !s.More() {
			if rc == nil {
				rc = http.NewResponseController(w)
			}
			if rc.Flush() != nil {
				return out
			}
		}
	}
	h2client.AddFields(w.Header(), s.Trailer(), trailerKey) // complete: the readLoop writes no more
	return out
}

// fail answers an upstream failure that came before the response header, unless a retry takes it
// (absorbed).
func (f *h2cForwarder) fail(w http.ResponseWriter, r *http.Request, ep *core.Endpoint, err error) outcome {
	countUpstreamError(w, r, err)
	if absorbed(w, r, err) {
		return errOutcome(r, err)
	}
	status, ok := upstreamStatus(r, err)
	if !ok {
		f.fwds.log.Debug("client canceled", zap.String("host", r.Host), zap.Error(err))
		return outcomeOK
	}
	logUpstreamError(f.fwds.log, f.cl.name, r, ep.HostPort, status, err)
	f.errw.WriteError(w, r, status, http.StatusText(status))
	return errOutcome(r, err)
}

// failMidStream ends a response whose upstream failed after its header: in trailers when the
// route's error writer can (gRPC: a grpc-status the client reads), else by aborting the client's
// stream. It is the endpoint's failure unless the client went away.
func (f *h2cForwarder) failMidStream(w http.ResponseWriter, r *http.Request, ep *core.Endpoint, err error) outcome {
	status, ok := upstreamStatus(r, err)
	if !ok {
		return outcomeOK | outcomeAborted
	}
	if f.terrw == nil {
		return errOutcome(r, err) | outcomeAborted
	}
	f.fwds.log.Debug("upstream error mid-stream", zap.String("host", r.Host), zap.String("upstream", ep.HostPort),
		zap.Int("status", status), zap.Error(err))
	tr := http.Header{}
	f.terrw.WriteTrailerError(tr, r, status, http.StatusText(status))
	h := w.Header()
	for k, vv := range tr {
		h[trailerKey(k)] = vv
	}
	return errOutcome(r, err)
}

// requestFields are the request's HTTP/2 fields: pseudo-headers, the client's headers minus the
// connection-specific ones, TE only as "trailers", and X-Forwarded-For (the client's address
// appended to any chain it sent), -Host and -Proto, as the HTTP/1.1 path sets them.
func requestFields(r *http.Request, scheme string, add func(name, value string)) {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	add(":method", r.Method)
	add(":scheme", scheme)
	add(":authority", host)
	add(":path", r.URL.RequestURI())
	for k, vv := range r.Header {
		if h2cSkip[k] {
			if k == "Te" && containsToken(vv, "trailers") {
				add("te", "trailers")
			}
			continue
		}
		name := h2client.LowerName(k)
		if connectionNamed(r.Header["Connection"], k) {
			continue
		}
		for _, v := range vv {
			if h2client.ValidField(name, v) {
				add(name, v)
			}
		}
	}
	if r.ContentLength > 0 {
		add("content-length", strconv.FormatInt(r.ContentLength, 10))
	}
	if len(r.Trailer) > 0 { // the trailers the request announced (net/http moved them off r.Header)
		keys := make([]string, 0, len(r.Trailer))
		for k := range r.Trailer {
			keys = append(keys, k)
		}
		add("trailer", strings.Join(keys, ","))
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		if prior := r.Header["X-Forwarded-For"]; len(prior) > 0 {
			ip = strings.Join(prior, ", ") + ", " + ip
		}
		if h2client.ValidField("x-forwarded-for", ip) {
			add("x-forwarded-for", ip)
		}
	}
	if h2client.ValidField("x-forwarded-host", host) {
		add("x-forwarded-host", host)
	}
	if r.TLS != nil {
		add("x-forwarded-proto", "https")
	} else {
		add("x-forwarded-proto", "http")
	}
}

// connectionNamed reports whether the Connection header lists name (those are hop-by-hop too).
func connectionNamed(conn []string, name string) bool {
	for _, v := range conn {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), name) {
				return true
			}
		}
	}
	return false
}

func containsToken(vv []string, tok string) bool {
	for _, v := range vv {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), tok) {
				return true
			}
		}
	}
	return false
}
