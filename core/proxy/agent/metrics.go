package agent

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	applied      prometheus.Counter
	rejected     prometheus.Counter
	applySeconds prometheus.Histogram
	connected    prometheus.Gauge
	reconnects   prometheus.Counter
	// lastSync is when the last snapshot was applied; with connected and reconnects it tells an
	// operator that a proxy lost its controller, how long ago it last heard of a change, and that
	// it resynced after reconnecting.
	lastSync      prometheus.Gauge
	svidExpiry    prometheus.Gauge
	snapshotBytes prometheus.Gauge
	// deltasApplied counts the pushes applied as deltas (applied counts them too);
	// deltaMismatches the deltas the proxy could not rebuild a snapshot from, after which it
	// asked for the snapshot in full.
	deltasApplied, deltaMismatches prometheus.Counter
	// listenersFailed counts the listeners of the snapshot serving now that could not be bound.
	listenersFailed prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		applied: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_proxy_snapshots_applied_total",
			Help: "Snapshots applied and acknowledged."}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_proxy_snapshots_rejected_total",
			Help: "Snapshots rejected (nacked); the previous table kept serving."}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coxswain_proxy_snapshot_apply_seconds",
			Help: "Time to decode-free apply a snapshot: build the table, bind, swap.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		connected: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coxswain_proxy_discovery_connected",
			Help: "1 while a discovery stream to the leader is open."}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_proxy_discovery_reconnects_total",
			Help: "Discovery streams that ended or failed to open."}),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coxswain_proxy_discovery_last_sync_timestamp_seconds",
			Help: "When the last snapshot pushed by the leader was applied (unix seconds); 0 before the first."}),
		svidExpiry: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coxswain_proxy_svid_expiry_timestamp_seconds",
			Help: "When the current SVID expires (unix seconds)."}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coxswain_proxy_snapshot_bytes",
			Help: "Encoded size of the last full snapshot applied (a delta leaves it)."}),
		deltasApplied: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_proxy_deltas_applied_total",
			Help: "Snapshots received as deltas (changes to the previous one), rebuilt, verified and applied."}),
		deltaMismatches: prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_proxy_delta_mismatches_total",
			Help: "Deltas the proxy could not rebuild the snapshot from (no base, a misfit, another version); it asked for the snapshot in full."}),
		listenersFailed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "coxswain_proxy_listeners_failed",
			Help: "Listeners of the snapshot serving now that could not be bound (port taken, address not local); retried with backoff."}),
	}
	if reg != nil {
		reg.MustRegister(m.applied, m.rejected, m.applySeconds, m.connected, m.reconnects, m.lastSync, m.svidExpiry, m.snapshotBytes, m.deltasApplied, m.deltaMismatches, m.listenersFailed)
	}
	return m
}
