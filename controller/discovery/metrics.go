package discovery

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the discovery server's Prometheus series.
type metrics struct {
	pushes       prometheus.Counter
	pushBytes    prometheus.Counter
	acks         prometheus.Counter
	nacks        prometheus.Counter
	streams      prometheus.Gauge
	latency      prometheus.Histogram
	refusals     *prometheus.CounterVec
	svidsIssued  prometheus.Counter
	pending      prometheus.Gauge
	tailored     prometheus.Counter
	bindFailures prometheus.Gauge
	// deltaPushes counts the pushes sent as deltas (pushes counts them too), deltasEncoded the
	// deltas encoded (one per publication and base), deltaMismatches the deltas a proxy could
	// not rebuild its snapshot from (it was then sent the snapshot in full).
	deltaPushes, deltasEncoded, deltaMismatches prometheus.Counter
	// Per connected proxy (label proxy: its node name), deleted when its stream ends, so that
	// rescheduled proxy pods do not pile up series.
	proxyPushes, proxyAcks, proxyNacks *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		pushes: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_snapshot_pushes_total",
			Help: "Snapshots sent to proxies."}),
		pushBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_snapshot_push_bytes_total",
			Help: "Encoded snapshot bytes sent to proxies."}),
		acks: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_acks_total",
			Help: "Snapshots proxies acknowledged (applied, listeners bound)."}),
		nacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_nacks_total",
			Help: "Snapshots proxies rejected; they keep serving their previous one."}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coxswain_discovery_streams",
			Help: "Proxies connected to this controller's discovery stream."}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coxswain_discovery_push_latency_seconds",
			Help:    "From a snapshot's publication to a proxy's acknowledgement of it.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coxswain_discovery_refusals_total",
			Help: "Streams and bootstrap requests refused, by reason."}, []string{"reason"}),
		svidsIssued: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_svids_issued_total",
			Help: "X.509 SVIDs issued to proxies."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coxswain_controller_gateways_held_pending",
			Help: "Gateways whose current generation waits for proxies to bind and acknowledge it."}),
		tailored: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_tailored_snapshots_total",
			Help: "Snapshots cut down for a proxy: a dedicated proxy's Gateway, or modules its binary lacks."}),
		bindFailures: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coxswain_discovery_listener_bind_failures",
			Help: "Listener sockets connected proxies report they cannot bind (one per proxy and listener); they serve the rest and retry these."}),
		deltaPushes: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_delta_pushes_total",
			Help: "Snapshots sent to proxies as deltas against the snapshot they acknowledged last."}),
		deltasEncoded: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_deltas_encoded_total",
			Help: "Deltas computed and encoded: one per snapshot and base version, shared by the proxies at that base."}),
		deltaMismatches: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_discovery_delta_mismatches_total",
			Help: "Deltas a proxy could not rebuild the snapshot from; it was sent the snapshot in full."}),
		proxyPushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coxswain_discovery_proxy_snapshot_pushes_total",
			Help: "Snapshots sent to one connected proxy."}, []string{"proxy"}),
		proxyAcks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coxswain_discovery_proxy_acks_total",
			Help: "Snapshots one connected proxy acknowledged."}, []string{"proxy"}),
		proxyNacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coxswain_discovery_proxy_nacks_total",
			Help: "Snapshots one connected proxy rejected."}, []string{"proxy"}),
	}
	if reg != nil {
		reg.MustRegister(m.pushes, m.pushBytes, m.acks, m.nacks, m.streams, m.latency, m.refusals, m.svidsIssued, m.pending, m.tailored, m.bindFailures,
			m.deltaPushes, m.deltasEncoded, m.deltaMismatches,
			m.proxyPushes, m.proxyAcks, m.proxyNacks)
	}
	return m
}

// connected makes a proxy's series, at zero, when its stream starts: rate() and the dashboard
// see a proxy that has had no nack yet.
func (m *metrics) connected(proxy string) {
	m.proxyPushes.WithLabelValues(proxy)
	m.proxyAcks.WithLabelValues(proxy)
	m.proxyNacks.WithLabelValues(proxy)
}

// forget deletes the series of a proxy whose stream ended.
func (m *metrics) forget(proxy string) {
	m.proxyPushes.DeleteLabelValues(proxy)
	m.proxyAcks.DeleteLabelValues(proxy)
	m.proxyNacks.DeleteLabelValues(proxy)
}

func (m *metrics) refused(reason string) { m.refusals.WithLabelValues(reason).Inc() }
