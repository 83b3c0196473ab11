package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"

	"github.com/coxswain-labs/coxswain/core"
)

// load makes the module from JSON through core.Load, as a proxy does.
func load(t testing.TB, bc *core.BuildContext, json string) *RateLimit {
	t.Helper()
	mc := core.MustConfig(ModuleID, nil)
	mc.Json = []byte(json)
	f, err := core.Load[core.HTTPRequestFilter](bc, mc)
	if err != nil {
		t.Fatalf("Load(%s): %v", json, err)
	}
	return f.(*RateLimit)
}

func newBC(t testing.TB, settings map[string]string) *core.BuildContext {
	bc := core.NewBuildContext(context.Background(), nil, core.NewRegistry((*RateLimit)(nil)), nil)
	bc.Shared, bc.Settings = core.NewSharedState(), settings
	t.Cleanup(func() { _ = bc.Close() })
	return bc
}

func request(remote string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestLimitAndHeaders(t *testing.T) {
	f := load(t, newBC(t, nil), `{"requests":2,"unit":"Minute","burst":3}`)
	for i := range 3 {
		w := httptest.NewRecorder()
		if !f.FilterRequest(w, request("192.0.2.1:1000")) {
			t.Fatalf("request %d refused", i)
		}
		if got := w.Header().Get("X-RateLimit-Limit"); got != "3" {
			t.Errorf("request %d: X-RateLimit-Limit %q, want 3 (the burst)", i, got)
		}
		if got := w.Header().Get("X-RateLimit-Remaining"); got != strconv.Itoa(2-i) {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %d", i, got, 2-i)
		}
	}
	w := httptest.NewRecorder()
	if f.FilterRequest(w, request("192.0.2.1:2000")) {
		t.Fatal("fourth request admitted")
	}
	h := w.Header()
	// 2 per minute: a token every 30 s, the bucket full again after 90 s.
	if w.Code != http.StatusTooManyRequests || h.Get("Retry-After") != "30" || h.Get("X-RateLimit-Remaining") != "0" ||
		h.Get("X-RateLimit-Reset") != "90" {
		t.Errorf("refusal: %d %v", w.Code, h)
	}
	if !f.FilterRequest(httptest.NewRecorder(), request("192.0.2.2:1000")) {
		t.Error("another client refused")
	}
	if n := testutil.ToFloat64(f.rejected); n != 1 {
		t.Errorf("rejected counter %v, want 1", n)
	}
}

func TestGRPCRefusal(t *testing.T) {
	f := load(t, newBC(t, nil), `{"requests":1,"key":{"type":"Header","header":"x-api-key"}}`)
	r := request("192.0.2.1:1", "Content-Type", "application/grpc", "X-Api-Key", "k")
	f.FilterRequest(httptest.NewRecorder(), r)
	w := httptest.NewRecorder()
	if f.FilterRequest(w, r) {
		t.Fatal("second call admitted")
	}
	if w.Code != http.StatusOK || w.Header().Get("Grpc-Status") != "8" || w.Header().Get("Retry-After") != "1" {
		t.Errorf("gRPC refusal: %d %v", w.Code, w.Header())
	}
}

// TestNoKeyNotCounted: without the key header the request is admitted and spends nothing.
func TestNoKeyNotCounted(t *testing.T) {
	f := load(t, newBC(t, nil), `{"requests":1,"key":{"type":"Header","header":"X-Tenant"}}`)
	for range 5 {
		w := httptest.NewRecorder()
		if !f.FilterRequest(w, request("192.0.2.1:1")) || w.Header().Get("X-RateLimit-Limit") != "" {
			t.Fatalf("request without the header: refused or counted (%v)", w.Header())
		}
	}
	if !f.FilterRequest(httptest.NewRecorder(), request("192.0.2.1:1", "X-Tenant", "a")) {
		t.Error("first request with the header refused")
	}
	if f.FilterRequest(httptest.NewRecorder(), request("192.0.2.1:1", "X-Tenant", "a")) {
		t.Error("second request with the header admitted")
	}
	if !f.FilterRequest(httptest.NewRecorder(), request("192.0.2.1:1", "X-Tenant", strings.Repeat("b", 300))) {
		t.Error("a long key refused")
	}
}

// TestSharedAcrossTables: a new table with the same object (zone and spec) keeps the buckets; a
// changed spec or another object starts afresh; the same object in two rules is one limit.
func TestSharedAcrossTables(t *testing.T) {
	shared := core.NewSharedState()
	build := func() *core.BuildContext {
		bc := core.NewBuildContext(context.Background(), nil, core.NewRegistry((*RateLimit)(nil)), nil)
		bc.Shared = shared
		return bc
	}
	const spec = `{"requests":1,"unit":"Hour","zone":"default/api"}`
	bcA := build()
	a1, a2 := load(t, bcA, spec), load(t, bcA, spec) // two rules naming one object
	r := request("192.0.2.7:1")
	if !a1.FilterRequest(httptest.NewRecorder(), r) || a2.FilterRequest(httptest.NewRecorder(), r) {
		t.Fatal("two rules of one object: want one shared bucket")
	}
	bcB := build()
	b := load(t, bcB, spec)
	_ = bcA.Close() // table A retires after B is built, as the engine does
	if b.FilterRequest(httptest.NewRecorder(), r) {
		t.Error("the next table forgot the bucket")
	}
	if !load(t, bcB, `{"requests":1,"unit":"Hour","burst":2,"zone":"default/api"}`).FilterRequest(httptest.NewRecorder(), r) {
		t.Error("a changed spec kept the old bucket")
	}
	if !load(t, bcB, `{"requests":1,"unit":"Hour","zone":"default/other"}`).FilterRequest(httptest.NewRecorder(), r) {
		t.Error("another object shares the bucket")
	}
	_ = bcB.Close()
	if n := shared.Len(); n != 0 {
		t.Errorf("%d shared values left after the last table", n)
	}
}

func TestInvalidConfig(t *testing.T) {
	tests := []struct{ json, want string }{
		{`{}`, "requests must be greater than 0"},
		{`{"requests":1,"unit":"Day"}`, `unit "Day"`},
		{`{"requests":1,"key":{"type":"Header"}}`, "key.header is required"},
		{`{"requests":1,"key":{"header":"x"}}`, "only for key type Header"},
		{`{"requests":1,"key":{"type":"Header","header":"a b"}}`, "not a valid header name"},
		{`{"requests":1,"mode":"Fleet"}`, `mode "Fleet"`},
		{`{"requests":1,"mode":"Global","failureMode":"Maybe"}`, `failureMode "Maybe"`},
		{`{"requests":1,"burst":-1}`, "burst must be greater than 0"},
		{`{"requests":1,"window":"1s"}`, "unknown field"},
	}
	for _, tt := range tests {
		mc := core.MustConfig(ModuleID, nil)
		mc.Json = []byte(tt.json)
		_, err := core.Load[core.HTTPRequestFilter](newBC(t, nil), mc)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.json, err, tt.want)
		}
	}
	f := &RateLimit{Config: Config{Spec: Spec{Requests: 1, FailureMode: FailClosed}}}
	if w := f.ConfigWarnings(); len(w) != 1 || !strings.Contains(w[0], "no effect on a Local limit") {
		t.Errorf("warnings %v", w)
	}
}

// TestEviction: a bucket that refilled is dropped by a sweep; at the cap with nothing to evict a
// new key shares the overflow bucket; once buckets refill new keys get their own again.
func TestEviction(t *testing.T) {
	s := newBucketStore(rate.Limit(1), 1, numShards, hashString, strings.Clone) // one key per shard
	t.Cleanup(func() { _ = s.Close() })
	t0 := time.Now()
	keys := map[int][]string{} // keys by shard
	for i := 0; len(keys) < numShards || len(keys[0]) < 3; i++ {
		k := "k" + strconv.Itoa(i)
		sh := int(hashString(k) % numShards)
		keys[sh] = append(keys[sh], k)
	}
	a, b, c := keys[0][0], keys[0][1], keys[0][2]
	if !s.take(a, t0).allowed {
		t.Fatal("first key refused")
	}
	// The shard is full and a's bucket is empty: b overflows (and spends the overflow token), c
	// shares it and is refused.
	if d := s.take(b, t0); !d.allowed || s.overflowed.Load() != 1 {
		t.Fatalf("b: %+v, overflowed %d", d, s.overflowed.Load())
	}
	if s.take(c, t0).allowed {
		t.Error("c admitted from the spent overflow bucket")
	}
	// After a refill period a's bucket is full: the next new key evicts it.
	t1 := t0.Add(2 * time.Second)
	if !s.take(b, t1).allowed || s.len() != 1 || s.overflowed.Load() != 2 {
		t.Errorf("after refill: len %d, overflowed %d", s.len(), s.overflowed.Load())
	}
	s.sweep(t1.Add(2 * time.Second))
	if s.len() != 0 {
		t.Errorf("sweep left %d buckets", s.len())
	}
}

// TestKeyFloodMemory drives 1,000,000 distinct keys through FilterRequest and checks that the
// heap does not grow past the documented bound (DefaultMaxKeys buckets, under 32 MiB).
func TestKeyFloodMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000,000 requests")
	}
	const n, bound = 1_000_000, 32 << 20
	f := load(t, newBC(t, nil), `{"requests":10,"burst":20,"key":{"type":"Header","header":"X-Api-Key"}}`)
	r := request("192.0.2.1:1")
	vals := []string{""}
	r.Header["X-Api-Key"] = vals
	w := &discardWriter{h: http.Header{}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := make([]byte, 0, 32)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "tenant-"...), int64(i), 10)
		vals[0] = string(buf) // as the server would: a fresh string per request
		f.FilterRequest(w, r)
		clear(w.h)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	kept := f.strs.len()
	t.Logf("%d distinct keys: %d buckets kept, %d overflowed, heap growth %.1f MiB (%.0f B per bucket)",
		n, kept, f.strs.overflowed.Load(), float64(growth)/(1<<20), float64(growth)/float64(max(kept, 1)))
	if kept > DefaultMaxKeys {
		t.Errorf("%d buckets kept, want at most %d", kept, DefaultMaxKeys)
	}
	if growth > bound {
		t.Errorf("heap grew %d bytes, want under %d", growth, bound)
	}
	runtime.KeepAlive(f)
}

type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }

// TestAdmittedDoesNotAllocate: the common path (a known client, admitted) allocates nothing.
func TestAdmittedDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct{ name, spec string }{
		{"client IP", `{"requests":1000000000,"burst":1000}`},
		{"header", `{"requests":1000000000,"burst":1000,"key":{"type":"Header","header":"X-Api-Key"}}`},
	} {
		f := load(t, newBC(t, nil), tc.spec)
		r := request("192.0.2.1:1", "X-Api-Key", "k")
		w := &discardWriter{h: http.Header{}}
		f.FilterRequest(w, r)
		if n := testing.AllocsPerRun(1000, func() { f.FilterRequest(w, r) }); n != 0 {
			t.Errorf("%s: %v allocs per admitted request, want 0", tc.name, n)
		}
	}
}

func BenchmarkRateLimit(b *testing.B) {
	cases := []struct {
		name, spec string
		header     bool
	}{
		{"ClientIP/admitted", `{"requests":1000000000,"burst":1000}`, false},
		{"ClientIP/rejected", `{"requests":1,"unit":"Hour"}`, false},
		{"Header/admitted", `{"requests":1000000000,"burst":1000,"key":{"type":"Header","header":"X-Api-Key"}}`, true},
		{"Header/rejected", `{"requests":1,"unit":"Hour","key":{"type":"Header","header":"X-Api-Key"}}`, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f := load(b, newBC(b, nil), c.spec)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				w := &discardWriter{h: http.Header{}}
				i := 0
				for pb.Next() {
					// A few hundred distinct clients, each hit again and again.
					i = (i + 1) % len(benchRequests)
					f.FilterRequest(w, benchRequests[i])
					clear(w.h)
				}
			})
		})
	}
}

// benchRequests are only read by the filter, so the benchmark's goroutines share them.
var benchRequests = func() []*http.Request {
	rs := make([]*http.Request, 256)
	for i := range rs {
		rs[i] = request(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 1000).String(), "X-Api-Key", fmt.Sprint("key-", i))
	}
	return rs
}()
