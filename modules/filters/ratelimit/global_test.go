package ratelimit

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit/redistest"
)

// TestGlobal runs Global limits against a real redis-server: two proxies' modules (separate
// shared state, as separate processes have) share one bucket; with Redis gone, Open admits and
// Closed refuses, and both count the requests decided without it.
func TestGlobal(t *testing.T) {
	redis := redistest.Start(t)
	settings := map[string]string{SettingRedisAddress: redis.Addr}
	const spec = `{"requests":3,"unit":"Hour","mode":"Global","zone":"default/g","key":{"type":"Header","header":"X-Key"}}`
	a, b := load(t, newBC(t, settings), spec), load(t, newBC(t, settings), spec)
	r := request("192.0.2.1:1", "X-Key", "k")
	for i, f := range []*RateLimit{a, b, a} {
		w := httptest.NewRecorder()
		if !f.FilterRequest(w, r) || w.Header().Get("X-RateLimit-Remaining") != []string{"2", "1", "0"}[i] {
			t.Fatalf("request %d: refused or %v", i, w.Header())
		}
	}
	w := httptest.NewRecorder()
	if b.FilterRequest(w, r) || w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1200" {
		t.Fatalf("fourth request: %d %v", w.Code, w.Header())
	}
	if !a.FilterRequest(httptest.NewRecorder(), request("192.0.2.1:1", "X-Key", "other")) {
		t.Error("another key refused")
	}
	// A client IP key works too.
	ip := load(t, newBC(t, settings), `{"requests":1,"unit":"Hour","mode":"Global","zone":"default/ip"}`)
	if !ip.FilterRequest(httptest.NewRecorder(), r) || ip.FilterRequest(httptest.NewRecorder(), r) {
		t.Error("client IP key: want one admitted, then refused")
	}

	open := load(t, newBC(t, settings), `{"requests":1,"mode":"Global","zone":"default/open"}`)
	closed := load(t, newBC(t, settings), `{"requests":1,"mode":"Global","failureMode":"Closed","zone":"default/closed"}`)
	redis.Kill()
	for range 3 {
		if !open.FilterRequest(httptest.NewRecorder(), r) {
			t.Error("failureMode Open refused with Redis down")
		}
	}
	w = httptest.NewRecorder()
	if closed.FilterRequest(w, r) || w.Code != http.StatusServiceUnavailable {
		t.Errorf("failureMode Closed with Redis down: %d", w.Code)
	}
	g := httptest.NewRecorder()
	if closed.FilterRequest(g, request("192.0.2.1:1", "Content-Type", "application/grpc")) || g.Header().Get("Grpc-Status") != "14" {
		t.Errorf("failureMode Closed, gRPC: %v", g.Header())
	}
	if n := testutil.ToFloat64(open.redisErrors); n != 3 {
		t.Errorf("redis errors of the Open limit: %v, want 3", n)
	}

	// Without an address configured, a Global limit behaves as with Redis down.
	none := load(t, newBC(t, nil), `{"requests":1,"mode":"Global","failureMode":"Closed","zone":"default/none"}`)
	if none.FilterRequest(httptest.NewRecorder(), r) {
		t.Error("no Redis configured, failureMode Closed: admitted")
	}
}
