package proxy

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// gathered is every series of the families named, as "name{label=value,...}" → value.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(labels)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

func stateSeries(route, upstream string) string {
	return "coxswain_proxy_circuit_breaker_state{route=" + route + ",upstream=" + upstream + "}"
}

// retain keeps an address's breaker across a new *core.Endpoint for it, gives new addresses
// closed breakers, and forgets addresses that left, deleting their series unless another
// breaker still uses them.
func TestBreakerSetRetain(t *testing.T) {
	reg := prometheus.NewRegistry()
	series := testSeries(t, core.NewMetrics(reg))
	cfg := breakerConfigOf(&irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 10_000, OpenMs: 60_000, MinRequests: 1})
	s := newBreakerSet("HTTPRoute/ns/r", cfg, series)
	a, b := core.NewEndpoint("10.0.0.1", 80, 1), core.NewEndpoint("10.0.0.2", 80, 1)
	s.retain([]*core.Endpoint{a, b})
	br, ok := s.admit(a)
	if !ok || br == nil {
		t.Fatal("a closed breaker did not admit")
	}
	br.done(outcomeFailed) // min 1: open
	if _, ok := s.admit(a); ok {
		t.Fatal("a's breaker did not open")
	}

	a2 := core.NewEndpoint("10.0.0.1", 80, 3) // a with another weight: a new *Endpoint
	c := core.NewEndpoint("10.0.0.3", 80, 1)
	s.retain([]*core.Endpoint{a2, c})
	if _, ok := s.admit(a2); ok {
		t.Error("a's open breaker was not kept for its new *Endpoint")
	}
	if br, ok := s.admit(c); !ok || br == nil {
		t.Error("the new endpoint has no closed breaker")
	}
	if br, ok := s.admit(b); !ok || br != nil {
		t.Error("the endpoint that left still has a breaker")
	}
	got := gathered(t, reg)
	if _, ok := got[stateSeries("HTTPRoute/ns/r", "10.0.0.2:80")]; ok {
		t.Error("the state series of the endpoint that left is still exported")
	}
	if v, ok := got[stateSeries("HTTPRoute/ns/r", "10.0.0.1:80")]; !ok || v != 1 {
		t.Errorf("a's state series %v (present %v), want 1 (open)", v, ok)
	}

	// A second set with the same route and an address of the first (another policy while the old
	// table drains): closing it leaves the first's series alone.
	other := newBreakerSet("HTTPRoute/ns/r", cfg, series)
	other.retain([]*core.Endpoint{c})
	_ = other.Close()
	if _, ok := gathered(t, reg)[stateSeries("HTTPRoute/ns/r", "10.0.0.3:80")]; !ok {
		t.Error("closing one set deleted a series another set still uses")
	}
	_ = s.Close()
	for k := range gathered(t, reg) {
		if strings.HasPrefix(k, "coxswain_proxy_circuit_breaker") {
			t.Errorf("series %s left after every set closed", k)
		}
	}
}

func TestRouteObject(t *testing.T) {
	for in, want := range map[string]string{
		"HTTPRoute/ns/name/rule/0/match/0": "HTTPRoute/ns/name",
		"GRPCRoute/ns/g/rule/12":           "GRPCRoute/ns/g",
		"plain":                            "plain",
	} {
		if got := routeObject(in); got != want {
			t.Errorf("routeObject(%q) = %q, want %q", in, got, want)
		}
	}
}
