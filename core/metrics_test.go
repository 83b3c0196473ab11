package core

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMetricsOutliveTables: two tables asking for one counter get the same series, registered
// once; a second proxy on the same registry (the in-process proxy of the next leadership term)
// adopts it.
func TestMetricsOutliveTables(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	a, err := m.CounterVec("coxswain_test_total", "help", "zone")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.CounterVec("coxswain_test_total", "help", "zone")
	if err != nil || a != b {
		t.Fatalf("second ask: %v, same vector %v", err, a == b)
	}
	a.WithLabelValues("x").Inc()
	c, err := NewMetrics(reg).CounterVec("coxswain_test_total", "help", "zone")
	if err != nil {
		t.Fatal(err)
	}
	c.WithLabelValues("x").Inc()
	if n := testutil.ToFloat64(a.WithLabelValues("x")); n != 2 {
		t.Errorf("counter = %v, want 2", n)
	}
	if _, err := m.CounterVec("coxswain_test_total", "help", "other"); err == nil {
		t.Error("other labels under the same name: no error")
	}
	if _, err := m.CounterVec("ratelimit_total", "help"); err == nil || !strings.Contains(err.Error(), "coxswain_") {
		t.Errorf("unprefixed name: %v", err)
	}
	var none *Metrics
	if v, err := none.CounterVec("coxswain_test_total", "help"); err != nil || v == nil {
		t.Errorf("nil Metrics: %v, %v", v, err)
	}
}

// TestGaugeVec: a gauge vector is shared by name like a counter vector, adopted from the
// registry by a second Metrics, and a name is one kind of vector only.
func TestGaugeVec(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	a, err := m.GaugeVec("coxswain_test_state", "help", "zone")
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.GaugeVec("coxswain_test_state", "help", "zone")
	if err != nil || a != b {
		t.Fatalf("second ask: %v, same vector %v", err, a == b)
	}
	a.WithLabelValues("x").Set(2)
	c, err := NewMetrics(reg).GaugeVec("coxswain_test_state", "help", "zone")
	if err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(c.WithLabelValues("x")); n != 2 {
		t.Errorf("adopted gauge = %v, want 2", n)
	}
	if _, err := m.CounterVec("coxswain_test_state", "help", "zone"); err == nil {
		t.Error("a gauge's name asked for as a counter: no error")
	}
	if _, err := m.GaugeVec("coxswain_test_state", "other help", "zone"); err == nil {
		t.Error("other help under the same name: no error")
	}
	if _, err := m.GaugeVec("state", "help"); err == nil {
		t.Error("unprefixed name: no error")
	}
	var none *Metrics
	if v, err := none.GaugeVec("coxswain_test_state", "help"); err != nil || v == nil {
		t.Errorf("nil Metrics: %v, %v", v, err)
	}
}
