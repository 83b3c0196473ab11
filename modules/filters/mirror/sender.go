package mirror

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
)

// settings are the process's mirror settings.
type settings struct {
	concurrency, queue int
	timeout            time.Duration
}

func settingsOf(m map[string]string) (settings, error) {
	s := settings{concurrency: DefaultConcurrency, queue: DefaultQueue, timeout: DefaultTimeout}
	for name, dst := range map[string]*int{SettingConcurrency: &s.concurrency, SettingQueue: &s.queue} {
		if v, ok := m[name]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (n == 0 && name == SettingConcurrency) {
				return s, fmt.Errorf("setting %s=%q: want a whole number (at least 1 for concurrency, 0 for the queue)", name, v)
			}
			*dst = n
		}
	}
	if v, ok := m[SettingTimeout]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("setting %s=%q: want a positive duration", SettingTimeout, v)
		}
		s.timeout = d
	}
	return s, nil
}

// warnEvery is how often a sender logs a WARN at most.
const warnEvery = 10 * time.Second

// sender sends the copies for one mirror cluster: a queue and a fixed number of workers, with a
// transport of its own. Shared by every table that mirrors to the cluster; closed with the last.
type sender struct {
	log     *zap.Logger
	cluster string
	tr      *http.Transport
	scheme  string // "https" when the cluster has upstream TLS
	timeout time.Duration
	jobs    chan *job
	ctx     context.Context
	stop    context.CancelFunc

	lastWarn   atomic.Int64 // unix nanos of the last WARN
	suppressed atomic.Int64 // failures and drops not logged since
}

// newSender makes the sender of cluster c. A cluster with upstream TLS (BackendTLSPolicy) gets
// the copies over the cluster's own TLS dialer, so a mirror verifies and presents exactly what
// the primary traffic to that cluster does; an h2c cluster speaks HTTP/2 over it (ALPN h2).
func newSender(log *zap.Logger, c core.Cluster, h2c bool, s settings) *sender {
	d := &net.Dialer{Timeout: c.ConnectTimeout(), KeepAlive: 30 * time.Second}
	dialTLS := c.DialTLS()
	tr := &http.Transport{
		DialContext:         d.DialContext,
		DialTLSContext:      dialTLS,
		MaxIdleConnsPerHost: s.concurrency,
		IdleConnTimeout:     60 * time.Second,
		DisableCompression:  true,
		// No Proxy: the mirror is called directly, whatever the environment says.
	}
	var p http.Protocols
	switch {
	case h2c && dialTLS != nil:
		p.SetHTTP2(true)
	case h2c:
		p.SetUnencryptedHTTP2(true)
	default:
		p.SetHTTP1(true)
	}
	tr.Protocols = &p
	scheme := "http"
	if dialTLS != nil {
		scheme = "https"
	}
	ctx, stop := context.WithCancel(context.Background())
	sd := &sender{log: log, cluster: c.Name(), tr: tr, scheme: scheme, timeout: s.timeout,
		jobs: make(chan *job, s.queue), ctx: ctx, stop: stop}
	for range s.concurrency {
		go sd.run()
	}
	return sd
}

// Close implements io.Closer: the last table mirroring to the cluster is gone. In-flight mirror
// requests are cancelled; queued copies are dropped with the sender.
func (s *sender) Close() error {
	s.stop()
	s.tr.CloseIdleConnections()
	return nil
}

// enqueue hands j to a worker, or drops it when the queue is full: the primary never waits.
func (s *sender) enqueue(j *job) {
	select {
	case s.jobs <- j:
	default:
		j.m.counts[iDropped].Inc()
		s.warn("request mirror queue full: copies dropped", j.m.Route, nil)
	}
}

func (s *sender) run() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case j := <-s.jobs:
			s.send(j)
		}
	}
}

// send sends one copy to one endpoint of the cluster and discards the answer.
func (s *sender) send(j *job) {
	ctx, cancel := context.WithTimeout(s.ctx, s.timeout)
	defer cancel()
	start := time.Now()
	req := j.request(ctx)
	req.URL.Scheme = s.scheme
	ep := j.m.cluster.Pick(&core.PickInfo{Request: req, Client: j.client})
	if ep == nil {
		err := fmt.Errorf("cluster %s has no endpoint", s.cluster)
		j.m.counts[iFailed].Inc()
		s.warn("request mirror failed", j.m.Route, err)
		s.logCopy(j, start, "", nil, 0, err)
		return
	}
	req.URL.Host = ep.HostPort
	ep.Active.Add(1)
	defer ep.Active.Add(-1)
	resp, err := s.tr.RoundTrip(req)
	if err != nil {
		j.m.counts[iFailed].Inc()
		s.warn("request mirror failed", j.m.Route, err)
		s.logCopy(j, start, ep.HostPort, nil, 0, err)
		return
	}
	// Read a little so a keep-alive connection can be reused, and gRPC trailers arrive.
	n, _ := io.CopyN(io.Discard, resp.Body, MaxBody)
	_ = resp.Body.Close()
	j.m.counts[iSent].Inc()
	s.logCopy(j, start, ep.HostPort, resp, n, nil)
}

// logCopy writes the copy's access log line (sampled like the requests'): the request as the
// mirror saw it, its endpoint, and the mirror's status, or the error it got instead.
func (s *sender) logCopy(j *job, start time.Time, endpoint string, resp *http.Response, read int64, err error) {
	l := j.m.log
	if !l.Sampled() {
		return
	}
	r := accesslog.Record{Kind: accesslog.KindRequest, Time: start, Listener: j.listener, Gateway: j.gateway,
		Route: j.m.Route, Backend: s.cluster, Upstream: endpoint, Mirror: true, Method: j.method, Host: j.host,
		Path: j.url.Path, BytesIn: int64(len(j.body)), BytesOut: read, Duration: time.Since(start),
		ClientIP: j.client.Addr(), PeerIP: j.socketPeer.Addr()}
	if l.Query() {
		r.Query = j.url.RawQuery
	}
	if v := j.header["X-Request-Id"]; len(v) > 0 {
		r.RequestID = v[0]
	}
	if resp != nil {
		r.Status, r.Protocol = resp.StatusCode, resp.Proto
	}
	if err != nil {
		r.Error = err.Error()
	}
	r.UpstreamDuration = r.Duration
	l.Log(&r)
}

// warn logs at most once per warnEvery, saying how many were not logged since.
func (s *sender) warn(msg, route string, err error) {
	now := time.Now().UnixNano()
	last := s.lastWarn.Load()
	if now-last < int64(warnEvery) || !s.lastWarn.CompareAndSwap(last, now) {
		s.suppressed.Add(1)
		return
	}
	fields := []zap.Field{zap.String("cluster", s.cluster), zap.String("route", route),
		zap.Int64("suppressed", s.suppressed.Swap(0))}
	if err != nil {
		fields = append(fields, zap.Error(err))
	}
	s.log.Warn(msg, fields...)
}

// request is the copy as an outgoing request (its URL's host is the endpoint, set by send).
func (j *job) request(ctx context.Context) *http.Request {
	u := j.url
	u.Scheme, u.Host = "http", ""
	h := make(http.Header, len(j.header)+3)
	conn := j.header["Connection"]
	for k, vv := range j.header {
		if hop(k) || (len(conn) > 0 && listed(conn, k)) {
			if k == "Te" && len(vv) > 0 && strings.EqualFold(vv[0], "trailers") {
				h[k] = []string{"trailers"} // gRPC needs it; HTTP/2 allows only that value
			}
			continue
		}
		h[k] = vv
	}
	xff := ""
	for _, prior := range j.header["X-Forwarded-For"] {
		xff += prior + ", "
	}
	if j.peer.IsValid() {
		xff += j.peer.Addr().String()
	}
	if xff = strings.TrimSuffix(xff, ", "); xff != "" {
		h["X-Forwarded-For"] = []string{xff}
	}
	h["X-Forwarded-Host"] = []string{j.host}
	if j.tls {
		h["X-Forwarded-Proto"] = []string{"https"}
	} else {
		h["X-Forwarded-Proto"] = []string{"http"}
	}
	req := (&http.Request{Method: j.method, URL: &u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Host: j.host, Header: h}).WithContext(ctx)
	if j.hasBody {
		req.Body = io.NopCloser(bytes.NewReader(j.body))
		req.ContentLength = int64(len(j.body))
		if len(j.body) == 0 {
			req.Body = http.NoBody
		}
	}
	return req
}

// hop are the request headers that describe the client's connection, or that the sender sets
// itself; none is copied to the mirror as received.
func hop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect", "Host", "Content-Length",
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return false
}

// listed reports whether header k is named in the Connection header values conn.
func listed(conn []string, k string) bool {
	for _, v := range conn {
		for item := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(item), k) {
				return true
			}
		}
	}
	return false
}
