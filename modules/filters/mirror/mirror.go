// Package mirror is Gateway API's RequestMirror filter, "filter.http.request_mirror": a copy of
// each request (or of a sampled share of them) goes to the mirror's backend, whose answer is
// thrown away. The primary exchange never waits for the mirror and is never changed by it:
//
//   - The copy is taken where the filter stands in the rule's chain (the header modifiers before
//     it apply to it) and handed, once the primary exchange is done, to a sender of the mirror
//     cluster: a bounded queue and a fixed number of workers, shared by every table and route
//     that mirrors to that cluster (core.Shared). A full queue drops the copy and counts it; the
//     request that caused it does not wait.
//   - A request body is teed while the primary reads it, into one buffer of at most MaxBody; a
//     longer body is not mirrored (result "body_too_large"), and neither is a body the primary
//     exchange did not read to its end (result "body_incomplete", say a backend that answered
//     early or an unreachable primary). Nothing is read on the mirror's behalf.
//   - Mirror requests use connections of their own (one transport per mirror cluster, over the
//     cluster's upstream TLS when it has one: core.Cluster.DialTLS), so a
//     slow or dead mirror cannot hold the connections the primary traffic needs.
//
// The mirror sees the request the primary would have: the same method, Host, path, query and
// end-to-end headers (hop-by-hop ones dropped), X-Forwarded-For/-Host/-Proto as the engine sets
// them, to one endpoint of its cluster picked by the cluster's balancer. Results are counted in
// coxswain_proxy_mirror_requests_total{route,upstream,result} and failures logged at WARN, at
// most once per 10 s per mirror cluster. Each copy sent (or that failed) gets an access log line
// of its own, marked "mirror": true.
package mirror

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

func init() { core.RegisterModule((*Mirror)(nil)) }

var (
	_ core.HTTPMiddleware = (*Mirror)(nil)
	_ core.Provisioner    = (*Mirror)(nil)
	_ core.ConfigChecker  = (*Mirror)(nil)
)

// Results, the values of the metric's result label.
const (
	// ResultSent: the mirror answered (with any status: its answer is ignored).
	ResultSent = "sent"
	// ResultFailed: the mirror could not be reached or did not answer in time, or its cluster
	// had no endpoint.
	ResultFailed = "failed"
	// ResultDropped: the mirror cluster's queue was full.
	ResultDropped = "dropped"
	// ResultBodyTooLarge: the request body was longer than MaxBody; nothing was sent.
	ResultBodyTooLarge = "body_too_large"
	// ResultBodyIncomplete: the primary exchange did not read the whole body; nothing was sent.
	ResultBodyIncomplete = "body_incomplete"
)

var results = [...]string{ResultSent, ResultFailed, ResultDropped, ResultBodyTooLarge, ResultBodyIncomplete}

const (
	iSent = iota
	iFailed
	iDropped
	iTooLarge
	iIncomplete
)

// Mirror is the module.
type Mirror struct {
	Config

	all     bool   // every request is mirrored
	num     uint64 // else Numerator of every den
	den     uint64
	cluster core.Cluster
	send    *sender // nil: the mirror cannot run (logged at Provision), requests pass untouched
	counts  [len(results)]prometheus.Counter
	log     *accesslog.Logger // a line per copy sent (or failed), marked mirror; nil: none
}

// CoxswainModule implements core.Module.
func (*Mirror) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Mirror) }}
}

// CheckConfig implements core.ConfigChecker.
func (m *Mirror) CheckConfig() error {
	if m.Cluster == "" {
		return fmt.Errorf("cluster is required")
	}
	if f := m.Fraction; f != nil {
		if f.Denominator == 0 {
			return fmt.Errorf("fraction.denominator must be at least 1")
		}
		if f.Numerator > f.Denominator {
			return fmt.Errorf("fraction %d/%d is more than 1", f.Numerator, f.Denominator)
		}
	}
	return nil
}

// Provision checks the config and finds the mirror cluster and its shared sender. A cluster the
// snapshot lacks leaves the filter inert (logged), never the route unserved: a mirror must not
// change the primary's answer.
func (m *Mirror) Provision(bc *core.BuildContext) error {
	if err := m.CheckConfig(); err != nil {
		return err
	}
	m.all = m.Fraction == nil || m.Fraction.Numerator == m.Fraction.Denominator
	if !m.all {
		m.num, m.den = uint64(m.Fraction.Numerator), uint64(m.Fraction.Denominator)
	}
	vec, err := bc.Metrics.CounterVec("coxswain_proxy_mirror_requests_total",
		"Copies of requests for RequestMirror filters, by route object, mirror cluster and result (sent, failed, dropped, body_too_large, body_incomplete).",
		"route", "upstream", "result")
	if err != nil {
		return err
	}
	for i, r := range results {
		m.counts[i] = vec.WithLabelValues(m.Route, m.Cluster, r)
	}
	m.log = bc.AccessLog
	set, err := settingsOf(bc.Settings)
	if err != nil {
		return err
	}
	if bc.Clusters == nil {
		bc.Log.Error("request mirror cannot run: no clusters in this build context", zap.String("cluster", m.Cluster))
		return nil
	}
	c, err := bc.Clusters.Cluster(m.Cluster)
	if err != nil {
		bc.Log.Error("request mirror cannot run", zap.String("cluster", m.Cluster), zap.Error(err))
		return nil
	}
	m.cluster = c
	h2c := protocolOf(bc.Snapshot, m.Cluster) == irv1.Cluster_H2C
	key := fmt.Sprintf("%s/%s/h2c=%t/%s/%+v/%s", ModuleID, c.Name(), h2c, c.ConnectTimeout(), set, tlsKey(bc.Snapshot, m.Cluster))
	m.send, err = core.Shared(bc, key, func() (*sender, error) {
		return newSender(bc.Log, c, h2c, set), nil
	})
	return err
}

func protocolOf(snap *irv1.Snapshot, cluster string) irv1.Cluster_Protocol {
	for _, c := range snap.GetClusters() {
		if c.GetName() == cluster {
			return c.GetProtocol()
		}
	}
	return irv1.Cluster_HTTP1
}

// WrapHTTP implements core.HTTPMiddleware.
func (m *Mirror) WrapHTTP(next http.Handler) http.Handler {
	if m.send == nil {
		return next
	}
	return &handler{m: m, next: next}
}

// sampled reports whether this request is mirrored: math/rand/v2's top-level source is
// per-thread, so sampling takes no lock.
func (m *Mirror) sampled() bool {
	return m.all || rand.Uint64N(m.den) < m.num
}

type handler struct {
	m    *Mirror
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	if !m.sampled() {
		h.next.ServeHTTP(w, r)
		return
	}
	j := &job{m: m, method: r.Method, url: *r.URL, host: r.Host, header: r.Header.Clone(),
		client: core.ClientAddr(r), peer: core.PeerAddr(r), socketPeer: core.SocketPeer(r), tls: r.TLS != nil}
	if o := core.ObserverOf(w); o != nil {
		j.listener, j.gateway = o.ObservedOrigin() // the copy's line names them like the request's
	}
	if j.url.User != nil {
		j.url.User = nil
	}
	var t *tee
	switch {
	case r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody:
	case r.ContentLength > MaxBody:
		m.counts[iTooLarge].Inc() // known before anything is read: no tee at all
		h.next.ServeHTTP(w, r)
		return
	default:
		t = teeOf(r)
	}
	h.next.ServeHTTP(w, r)
	if t != nil {
		body, res := t.take(r.ContentLength)
		if res >= 0 {
			m.counts[res].Inc()
			return
		}
		j.body, j.hasBody = body, true
	}
	m.send.enqueue(j)
}

// job is one copy waiting to be sent: everything of the request it needs, taken before the rest
// of the chain could change the request.
type job struct {
	m            *Mirror
	method, host string
	url          url.URL
	header       http.Header
	body         []byte
	hasBody      bool
	client, peer netip.AddrPort
	socketPeer   netip.AddrPort // the access log's peer_ip
	// listener and gateway took the request (its access log line's), "" when not observed.
	listener, gateway string
	tls               bool
}

// tlsKey identifies the upstream TLS of cluster in snap (its description and its client
// certificate's content), "" for cleartext: a sender is shared only while the TLS it dials with
// is the same, so a rotated CA or key pair gets a new sender (and fresh connections).
func tlsKey(snap *irv1.Snapshot, cluster string) string {
	var ut *irv1.UpstreamTLS
	for _, c := range snap.GetClusters() {
		if c.GetName() == cluster {
			ut = c.GetTls()
		}
	}
	if ut == nil {
		return ""
	}
	h := sha256.New()
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(ut)
	h.Write(b)
	for _, s := range snap.GetSecrets() {
		if s.GetName() == ut.GetClientCertificate() {
			b, _ = proto.MarshalOptions{Deterministic: true}.Marshal(s)
			h.Write(b)
		}
	}
	return "tls=" + hex.EncodeToString(h.Sum(nil))
}
