package ratelimit_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

func config(json string) []*irv1.ModuleConfig {
	mc := core.MustConfig(ratelimit.ModuleID, nil)
	mc.Json = []byte(json)
	return []*irv1.ModuleConfig{mc}
}

// TestLimitSurvivesSnapshots goes through the real engine: a snapshot that changes another route
// keeps the buckets; one that changes the RateLimit object starts afresh.
func TestLimitSurvivesSnapshots(t *testing.T) {
	const spec = `{"requests":2,"unit":"Hour","zone":"default/api"}`
	opts := filtertest.Options{Modules: []core.Module{(*ratelimit.RateLimit)(nil)}}
	h := filtertest.Start(t, config(spec), opts)
	for i := range 2 {
		if ex := h.Get(t, "/"); ex.Status != http.StatusOK || ex.Header.Get("X-RateLimit-Remaining") != []string{"1", "0"}[i] {
			t.Fatalf("request %d: %d %v", i, ex.Status, ex.Header)
		}
	}
	ex := h.Get(t, "/")
	if ex.Status != http.StatusTooManyRequests || ex.Upstream != nil || ex.Header.Get("Retry-After") != "1800" {
		t.Fatalf("over the limit: %d %v, upstream saw %v", ex.Status, ex.Header, ex.Upstream)
	}

	apply := func(filters []*irv1.ModuleConfig, extraRoute bool) {
		t.Helper()
		snap, err := filtertest.Snapshot(filters, opts, h.BackendPort)
		if err != nil {
			t.Fatal(err)
		}
		if extraRoute {
			vh := snap.Listeners[0].Servers[0].VirtualHosts[0]
			other := &irv1.Route{Name: "filtertest/other/rule/0/match/0", Backends: vh.Routes[0].Backends,
				Match: core.MustConfig(httproute.ModuleID, httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/other"}})}
			vh.Routes = append(vh.Routes, other)
			snap.Version = ""
			if err := irv1.Seal(snap); err != nil {
				t.Fatal(err)
			}
		}
		before := h.Proxy.Version()
		if err := h.Proxy.Apply(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
		if h.Proxy.Version() == before {
			t.Fatalf("snapshot %s not applied", before)
		}
	}
	apply(config(spec), true)
	if ex := h.Get(t, "/"); ex.Status != http.StatusTooManyRequests {
		t.Errorf("after an unrelated change: %d, want still limited", ex.Status)
	}
	apply(config(`{"requests":3,"unit":"Hour","zone":"default/api"}`), true)
	if ex := h.Get(t, "/"); ex.Status != http.StatusOK || ex.Header.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("after the object changed: %d %v, want a fresh bucket", ex.Status, ex.Header)
	}
}
