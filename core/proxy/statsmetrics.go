package proxy

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// StatsCollector exports ListenerStats on a Prometheus registry, read at each scrape: per IR
// listener, the counters its server keeps (connections, TLS handshake errors, UDP sessions, PROXY
// protocol rejections) as coxswain_proxy_listener_<name>{listener}. Counters get the _total
// suffix; what is open now (connections, sessions) is a gauge. The names are those the servers
// report, so a new counter a listener module adds is exported without a change here.
func (p *Proxy) StatsCollector() prometheus.Collector { return statsCollector{p} }

type statsCollector struct{ p *Proxy }

// Describe sends nothing: the series depend on the listeners bound (an unchecked collector).
func (statsCollector) Describe(chan<- *prometheus.Desc) {}

func (c statsCollector) Collect(ch chan<- prometheus.Metric) {
	for listener, stats := range c.p.ListenerStats() {
		for name, v := range stats {
			fq, kind := statMetric(name)
			desc := prometheus.NewDesc(fq, statHelp(name), []string{"listener"}, nil)
			ch <- prometheus.MustNewConstMetric(desc, kind, float64(v), listener)
		}
	}
}

// statMetric names the series of one listener counter and says whether it is a gauge.
func statMetric(name string) (string, prometheus.ValueType) {
	if name == "udp_sessions" || strings.HasSuffix(name, "_active") {
		return "coxswain_proxy_listener_" + name, prometheus.GaugeValue
	}
	return "coxswain_proxy_listener_" + name + "_total", prometheus.CounterValue
}

var statHelps = map[string]string{
	"http_connections_active":       "Downstream HTTP connections open now on the listener.",
	"http_connections_accepted":     "Downstream HTTP connections the listener has accepted.",
	"tls_handshake_errors":          "Downstream TLS handshakes that failed or timed out on an HTTPS listener.",
	"stream_connections_active":     "TCP/TLS route connections open now on the listener.",
	"stream_connections_accepted":   "TCP/TLS route connections the listener has accepted.",
	"stream_connections_dropped":    "TCP/TLS route connections closed before reaching a backend (no route, handshake or dial failure).",
	"udp_sessions":                  "UDP client sessions open now on the listener.",
	"udp_sessions_opened":           "UDP client sessions opened.",
	"udp_sessions_evicted":          "UDP client sessions evicted after the session timeout.",
	"udp_datagrams_dropped_cap":     "Datagrams from new clients dropped because the listener had its most sessions.",
	"udp_datagrams_dropped_noroute": "Datagrams dropped because no UDPRoute serves the listener.",
	"udp_sessions_open_failed":      "UDP sessions whose upstream socket could not be opened.",
	"udp_datagrams_send_failed":     "Datagrams that could not be sent on.",
	"proxy_protocol_rejected":       "Connections closed for a missing or invalid PROXY protocol header.",
	"connections_active":            "Downstream TCP connections open now on the listener socket (counted against its connection cap).",
	"connections_rejected_cap":      "Downstream connections closed at accept because the listener had its most connections open (--proxy-max-connections).",
	"quic_connections_accepted":     "QUIC connections accepted on an HTTPS listener's HTTP/3 socket.",
}

// ListenerMetricNames are the names of the listener series the stock listeners report, sorted
// (docs/observability.md lists them; test/dashboard holds the two together).
func ListenerMetricNames() []string {
	names := make([]string, 0, len(statHelps))
	for name := range statHelps {
		fq, _ := statMetric(name)
		names = append(names, fq)
	}
	slices.Sort(names)
	return names
}

func statHelp(name string) string {
	if h, ok := statHelps[name]; ok {
		return h
	}
	return "Listener counter " + name + " (see docs/observability.md)."
}
