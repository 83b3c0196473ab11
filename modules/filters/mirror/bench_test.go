package mirror

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// benchMirror is a provisioned-enough Mirror whose sender has no worker and no queue: every
// sampled copy is dropped, so the benchmark measures what the request path pays.
func benchMirror(f *Fraction) *Mirror {
	m := &Mirror{Config: Config{Cluster: "c", Fraction: f}}
	m.all = f == nil
	if f != nil {
		m.num, m.den = uint64(f.Numerator), uint64(f.Denominator)
	}
	for i := range m.counts {
		m.counts[i] = prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	}
	m.send = &sender{log: zap.NewNop(), jobs: make(chan *job)}
	return m
}

type nop struct{}

func (nop) ServeHTTP(http.ResponseWriter, *http.Request) {}

// BenchmarkNotSampled is a request the fraction leaves alone: a random draw, nothing else.
func BenchmarkNotSampled(b *testing.B) {
	h := benchMirror(&Fraction{Numerator: 1, Denominator: 1 << 30}).WrapHTTP(nop{})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(nil, r)
	}
}

// BenchmarkSampledDropped is a sampled request without a body whose copy is dropped: the header
// clone and the job are the cost of mirroring it at all.
func BenchmarkSampledDropped(b *testing.B) {
	h := benchMirror(nil).WrapHTTP(nop{})
	r := httptest.NewRequest(http.MethodGet, "/a/b?c=d", nil)
	r.Header.Set("Accept", "*/*")
	r.Header.Set("User-Agent", "bench")
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(nil, r)
	}
}
