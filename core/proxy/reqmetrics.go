package proxy

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Request metrics. Every HTTP request is counted once, when its response has ended, in
// coxswain_proxy_requests_total{gateway, route, backend, code_class} and observed in
// coxswain_proxy_request_duration_seconds{gateway, route}. The label values are fixed per route at
// table build (route object, its Gateway, the clusters of its backends), so the number of series
// is bounded by the routes and their backends, never by paths or clients. The table holds the
// resolved children (prometheus.Counter, prometheus.Observer), so a request only increments them:
// no label lookup, no allocation, no lock.
//
// Series are reference-counted by label set across tables, as the circuit breaker's are: a route
// kept by a new snapshot keeps its series (the new table resolves the same children), and the
// series of a route that no table serves any more are deleted when the last table holding them is
// closed, off the request path.

// codeClass indexes the code_class label values.
type codeClass uint8

const (
	class1xx codeClass = iota
	class2xx
	class3xx
	class4xx
	class5xx
	// classAborted: the response was cut off (the upstream failed after the header, or the
	// handler aborted it), so the client saw no complete answer.
	classAborted
	numClasses
)

var classLabels = [numClasses]string{"1xx", "2xx", "3xx", "4xx", "5xx", "aborted"}

func classOf(status int, aborted bool) codeClass {
	switch {
	case aborted:
		return classAborted
	case status < 200:
		return class1xx
	case status < 300:
		return class2xx
	case status < 400:
		return class3xx
	case status < 500:
		return class4xx
	}
	return class5xx
}

// durationBuckets are the classic buckets of the request duration histogram: 11 boundaries from
// 5 ms to 10 s cover what a gateway's SLO is written against, and a classic histogram is what
// every Prometheus scrapes and histogram_quantile reads without the native-histograms feature flag.
// The proxy keeps the histogram itself (durationvec.go): an observation is two atomic adds.
var durationBuckets = [...]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// requestSeries are the proxy's request series families and the reference counts of their label
// sets.
type requestSeries struct {
	requests    *prometheus.CounterVec
	duration    *durationVec
	streamConns *prometheus.CounterVec
	streamBytes *prometheus.CounterVec
	udpSessions *prometheus.CounterVec
	udpBytes    *prometheus.CounterVec

	upstreamErrors *prometheus.CounterVec

	mu       sync.Mutex
	refs     map[string]int // eager label sets, by strings.Join(labels, "\x00")
	routes   map[labelSet]*routeSeries
	backends map[labelSet]*backendSeries
}

func newRequestSeries(m *core.Metrics) (*requestSeries, error) {
	requests, err := m.CounterVec("coxswain_proxy_requests_total",
		"HTTP requests answered, per Gateway, route object, backend cluster (\"\" when no backend was reached: "+
			"a filter answered, the backend did not resolve, or nothing matched) and status class (1xx..5xx, aborted).",
		"gateway", "route", "backend", "code_class")
	if err != nil {
		return nil, err
	}
	const durationName, durationHelp = "coxswain_proxy_request_duration_seconds",
		"Time from the request's dispatch to the end of its response handler, per Gateway and route object."
	duration, err := core.CollectorOf(m, durationName, durationHelp, []string{"gateway", "route"}, func() *durationVec {
		return newDurationVec(durationName, durationHelp)
	})
	if err != nil {
		return nil, err
	}
	streamConns, err := m.CounterVec("coxswain_proxy_stream_connections_total",
		"TCPRoute and TLSRoute connections ended, per Gateway and route object.", "gateway", "route")
	if err != nil {
		return nil, err
	}
	streamBytes, err := m.CounterVec("coxswain_proxy_stream_bytes_total",
		"Bytes TCPRoute and TLSRoute connections carried, per Gateway, route object and direction (in: from the client, out: to it), counted when the connection ends.",
		"gateway", "route", "direction")
	if err != nil {
		return nil, err
	}
	udpSessions, err := m.CounterVec("coxswain_proxy_udp_sessions_total",
		"UDPRoute client sessions ended (evicted when idle, or closed with their listener), per Gateway and route object.", "gateway", "route")
	if err != nil {
		return nil, err
	}
	udpBytes, err := m.CounterVec("coxswain_proxy_udp_bytes_total",
		"Datagram payload bytes UDPRoute sessions carried, per Gateway, route object and direction (in: from the client, out: to it), counted when the session ends.",
		"gateway", "route", "direction")
	if err != nil {
		return nil, err
	}
	upstreamErrors, err := m.CounterVec("coxswain_proxy_upstream_errors_total",
		"Exchanges with an upstream endpoint that failed before its answer, per Gateway, route object, backend cluster and reason "+
			"(connect_refused, connect_timeout, connect_tls, connect_other: the connection could not be made; "+
			"timeout: no answer in time; reset: the connection broke before the answer), retried ones included.",
		"gateway", "route", "backend", "reason")
	if err != nil {
		return nil, err
	}
	return &requestSeries{requests: requests, duration: duration, streamConns: streamConns, streamBytes: streamBytes,
		udpSessions: udpSessions, udpBytes: udpBytes, upstreamErrors: upstreamErrors,
		refs: map[string]int{}, routes: map[labelSet]*routeSeries{}, backends: map[labelSet]*backendSeries{}}, nil
}

// requestSeriesOf returns the proxy's request series, made on the first build (builds run under p.mu).
func (p *Proxy) requestSeriesOf() (*requestSeries, error) {
	if p.requests != nil {
		return p.requests, nil
	}
	s, err := newRequestSeries(p.metrics)
	if err != nil {
		return nil, fmt.Errorf("request metrics: %w", err)
	}
	p.requests = s
	return s, nil
}

// routeObs is one route's (or one listener's unrouted requests') series, resolved at table build
// as label sets whose children are made by the first request that needs them (lazyseries.go).
type routeObs struct {
	series   *requestSeries
	route    *routeSeries
	backends []backendObs // the route's backend clusters, each with its set
	// none is the set of backend "" (no backend reached: a filter answered, the backend did not
	// resolve, nothing matched), made by the first such request: most routes never see one.
	none atomic.Pointer[backendSeries]
	held *obsHeld // where the piece that resolved the route records none once made
	// duration is the route's histogram, kept here once made so that a request reaches it in
	// one load (lazyseries.go).
	duration atomic.Pointer[durationCells]
}

// backendObs is a backend cluster of a route and its label set.
type backendObs struct {
	cl     *cluster
	series *backendSeries
}

// backend returns the series of the backend cl (nil: none reached). Routes have a backend or
// two, so a scan beats a map.
func (o *routeObs) backend(cl *cluster) *backendSeries {
	for i := range o.backends {
		if o.backends[i].cl == cl {
			return o.backends[i].series
		}
	}
	return o.noBackend()
}

// noBackend is the set of backend "", made on first use. Not inlined, so that backend's scan
// is (this is the rare case).
//
//go:noinline
func (o *routeObs) noBackend() *backendSeries {
	if bs := o.none.Load(); bs != nil {
		return bs
	}
	return o.makeNone()
}

// makeNone is backend's slow path for backend "": the set is resolved and held as the route's
// others were at build, once (under s.mu). A request of a table whose holds were released
// already (a straggler of a closed table) gets a set of its own that no table holds.
func (o *routeObs) makeNone() *backendSeries {
	s := o.series
	s.mu.Lock()
	defer s.mu.Unlock()
	if bs := o.none.Load(); bs != nil {
		return bs
	}
	key := labelSet{gateway: o.route.gateway, route: o.route.route}
	var bs *backendSeries
	if o.held.released {
		bs = &backendSeries{labelSet: key}
	} else {
		bs = s.backendSeriesOf(o.held, key)
	}
	o.none.Store(bs)
	return bs
}

// obsHeld is what a table holds of the request series, released when it closes.
type obsHeld struct {
	keys     [][]string // eager label sets (layer 4): kind, then the label values
	routes   []*routeSeries
	backends []*backendSeries
	released bool // release ran: nothing is held through it any more
}

// routeObsOf resolves the series of one route object on gateway whose backends go to clusters
// (nil entries are unresolved backends, counted under backend ""), recording them in held.
func (s *requestSeries) routeObsOf(held *obsHeld, gateway, route string, clusters []*cluster) *routeObs {
	o := &routeObs{series: s, held: held}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := labelSet{gateway: gateway, route: route}
	rs := s.routes[key]
	if rs == nil {
		rs = &routeSeries{labelSet: key}
		s.routes[key] = rs
	}
	rs.holders++
	held.routes = append(held.routes, rs)
	o.route = rs
	n := 0
	for _, cl := range clusters {
		if cl != nil {
			n++
		}
	}
	if n > 0 {
		o.backends = make([]backendObs, 0, n)
	}
	for _, cl := range clusters {
		if cl == nil || slices.ContainsFunc(o.backends, func(b backendObs) bool { return b.cl.name == cl.name }) {
			continue
		}
		key.backend = cl.name
		o.backends = append(o.backends, backendObs{cl: cl, series: s.backendSeriesOf(held, key)})
	}
	return o
}

// backendSeriesOf is the shared set of one label set, held once more (under s.mu).
func (s *requestSeries) backendSeriesOf(held *obsHeld, key labelSet) *backendSeries {
	bs := s.backends[key]
	if bs == nil {
		bs = &backendSeries{labelSet: key}
		s.backends[key] = bs
	}
	bs.holders++
	held.backends = append(held.backends, bs)
	return bs
}

// streamObsOf resolves the series of one layer-4 route object on gateway: a UDPRoute's (udp)
// or a TCPRoute's or TLSRoute's.
func (s *requestSeries) streamObsOf(held *obsHeld, gateway, route string, udp bool) *streamObs {
	s.mu.Lock()
	defer s.mu.Unlock()
	conns, bytes, kind := s.streamConns, s.streamBytes, kindStream
	if udp {
		conns, bytes, kind = s.udpSessions, s.udpBytes, kindUDP
	}
	o := &streamObs{gateway: gateway, route: route,
		conns: conns.WithLabelValues(gateway, route),
		in:    bytes.WithLabelValues(gateway, route, "in"),
		out:   bytes.WithLabelValues(gateway, route, "out")}
	s.hold(held, kind, gateway, route)
	return o
}

// The kinds of eager label sets a table holds (the first element of a held key).
const (
	kindStream = "stream" // gateway, route: connections and both byte directions
	kindUDP    = "udp"    // gateway, route: sessions and both byte directions
)

// hold counts one more holder of a label set (under s.mu); labels[0] is its kind.
func (s *requestSeries) hold(held *obsHeld, labels ...string) {
	s.refs[strings.Join(labels, "\x00")]++
	held.keys = append(held.keys, slices.Clone(labels))
}

// release drops a closed table's holds, deleting the series no table holds any more.
func (s *requestSeries) release(held *obsHeld) {
	if s == nil || held == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	held.released = true
	for _, rs := range held.routes {
		if rs.holders--; rs.holders == 0 {
			delete(s.routes, rs.labelSet)
			s.duration.remove(rs.gateway, rs.route) // if a request made it
		}
	}
	for _, bs := range held.backends {
		if bs.holders--; bs.holders == 0 {
			delete(s.backends, bs.labelSet)
			bs.deleteMade(s)
		}
	}
	held.routes, held.backends = nil, nil
	for _, labels := range held.keys {
		k := strings.Join(labels, "\x00")
		if s.refs[k]--; s.refs[k] > 0 {
			continue
		}
		delete(s.refs, k)
		switch l := labels[1:]; labels[0] {
		case kindStream:
			s.streamConns.DeleteLabelValues(l...)
			s.streamBytes.DeleteLabelValues(l[0], l[1], "in")
			s.streamBytes.DeleteLabelValues(l[0], l[1], "out")
		case kindUDP:
			s.udpSessions.DeleteLabelValues(l...)
			s.udpBytes.DeleteLabelValues(l[0], l[1], "in")
			s.udpBytes.DeleteLabelValues(l[0], l[1], "out")
		}
	}
	held.keys = nil
}

// gatewayOf names the Gateway(s) of an IR Server from its sources ("<ns>/<gateway>/<section>"):
// "<ns>/<gateway>", or several joined by "," when Gateways share the Server's socket and hostname.
func gatewayOf(sources []string) string {
	var gws []string
	for _, s := range sources {
		gw := s
		if i := strings.LastIndexByte(s, '/'); i > 0 {
			gw = s[:i]
		}
		if !slices.Contains(gws, gw) {
			gws = append(gws, gw)
		}
	}
	slices.Sort(gws)
	return strings.Join(gws, ",")
}

// holdSeries returns where the piece being built records the series of s it holds: the route
// being compiled's (shared with later tables), else the table's.
func (b *builder) holdSeries(s *requestSeries) *obsHeld {
	if b.cur != nil {
		b.cur.series = s
		return &b.cur.held
	}
	b.t.reqSeries = s
	return &b.t.held
}

// observeRoute resolves the series of an HTTP route being built.
func (b *builder) observeRoute(rt *route, r *irv1.Route) error {
	rt.gateway, rt.rule = b.gateway, r.GetRuleName()
	if !b.p.reqMetrics {
		return nil
	}
	s, err := b.p.requestSeriesOf()
	if err != nil {
		return err
	}
	clusters := make([]*cluster, 0, len(r.GetBackends()))
	for _, be := range r.GetBackends() {
		cl, _ := b.lookupCluster(be.GetCluster())
		clusters = append(clusters, cl)
	}
	rt.obs = s.routeObsOf(b.holdSeries(s), b.gateway, routeObject(rt.name), clusters)
	return nil
}

// observeListener sets up how the requests of a listener being built are observed.
func (b *builder) observeListener(ls *ListenerState, http bool) error {
	if !b.p.reqMetrics && b.p.accessLog == nil {
		return nil
	}
	ls.obs = &listenerObs{listener: ls.Name, log: b.p.accessLog, metrics: b.p.reqMetrics}
	if !b.p.reqMetrics || !http {
		return nil
	}
	s, err := b.p.requestSeriesOf()
	if err != nil {
		return err
	}
	ls.obs.unrouted = s.routeObsOf(b.holdSeries(s), "", "", nil)
	return nil
}
