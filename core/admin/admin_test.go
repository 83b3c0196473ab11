package admin

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

func TestEndpoints(t *testing.T) {
	var ready atomic.Bool
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "coxswain_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	mux := NewMux(Options{Component: "proxy", Version: "v-test", Gatherer: reg, Subsystems: func() []Subsystem {
		return []Subsystem{{Name: "discovery", Ready: ready.Load(), Detail: map[string]string{"controller": "x"}}}
	}})
	srv, err := Serve("127.0.0.1:0", mux, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	base := "http://" + srv.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	tests := []struct {
		name, path string
		ready      bool
		code       int
		contains   string
	}{
		{"healthz", "/healthz", false, 200, "ok"},
		{"readyz before ready", "/readyz", false, 503, "discovery: not ready"},
		{"readyz when ready", "/readyz", true, 200, "ok"},
		{"metrics", "/metrics", true, 200, "coxswain_test_total 1"},
		{"process metrics", "/metrics", true, 200, "process_resident_memory_bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ready.Store(tc.ready)
			code, body := get(tc.path)
			if code != tc.code || !strings.Contains(body, tc.contains) {
				t.Fatalf("%s: %d %q", tc.path, code, body)
			}
		})
	}
	t.Run("health", func(t *testing.T) {
		ready.Store(false)
		_, body := get("/api/v1/health")
		var h Health
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatal(err)
		}
		if h.Component != "proxy" || h.Version != "v-test" || h.Ready || h.Leader != nil || len(h.Subsystems) != 1 {
			t.Fatalf("health %+v", h)
		}
	})
}
