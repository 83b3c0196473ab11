package cors_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/modules/filters/cors"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
)

// deny is a request filter that answers 403 itself, as an authorization filter does.
type deny struct{}

const denyID = "filter.http.test_deny"

func init() { core.RegisterModule((*deny)(nil)) }

func (*deny) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: denyID, New: func() core.Module { return new(deny) }}
}

func (*deny) FilterRequest(w http.ResponseWriter, _ *http.Request) bool {
	w.WriteHeader(http.StatusForbidden)
	return false
}

// TestLocalResponses: the answers the engine makes itself carry the CORS headers once, as an
// upstream's do: no endpoint (503), a refused connection (502), a denial by a filter after CORS,
// on an HTTP/1 cluster (the fast path) and an h2c one. A filter before CORS denies without them:
// CORS never ran for that request.
func TestLocalResponses(t *testing.T) {
	corsCfg := core.MustConfig(cors.ModuleID, cors.Config{AllowOrigins: []string{"https://app.example.com"}, AllowCredentials: true})
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, portS, _ := net.SplitHostPort(dead.Addr().String())
	_ = dead.Close()
	deadPort, _ := strconv.Atoi(portS)
	for _, tc := range []struct {
		name      string
		filters   []*irv1.ModuleConfig
		endpoints bool
		h2c       bool
		status    int
		cors      bool
	}{
		{"no endpoint", []*irv1.ModuleConfig{corsCfg}, false, false, http.StatusServiceUnavailable, true},
		{"connection refused", []*irv1.ModuleConfig{corsCfg}, true, false, http.StatusBadGateway, true},
		{"connection refused, h2c", []*irv1.ModuleConfig{corsCfg}, true, true, http.StatusBadGateway, true},
		{"denied after CORS", []*irv1.ModuleConfig{corsCfg, core.MustConfig(denyID, struct{}{})}, true, false, http.StatusForbidden, true},
		{"denied before CORS", []*irv1.ModuleConfig{core.MustConfig(denyID, struct{}{}), corsCfg}, true, false, http.StatusForbidden, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap, err := filtertest.Snapshot(tc.filters, filtertest.Options{}, uint32(deadPort))
			if err != nil {
				t.Fatal(err)
			}
			c := snap.Clusters[0]
			if !tc.endpoints {
				c.Endpoints = nil
			}
			if tc.h2c {
				c.Protocol = irv1.Cluster_H2C
			}
			if err := irv1.Seal(snap); err != nil {
				t.Fatal(err)
			}
			p := proxy.New(proxy.Options{Registry: core.Freeze()})
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = p.Close(ctx)
			})
			if err := p.Apply(context.Background(), snap); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://"+p.Bound()[0].Address+"/api", nil)
			req.Header.Set("Origin", "https://app.example.com")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = res.Body.Close()
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.status)
			}
			origin, creds, vary := res.Header.Values("Access-Control-Allow-Origin"), res.Header.Values("Access-Control-Allow-Credentials"), res.Header.Values("Vary")
			if !tc.cors {
				if len(origin) != 0 {
					t.Errorf("Access-Control-Allow-Origin %q on an answer CORS never saw", origin)
				}
				return
			}
			if len(origin) != 1 || origin[0] != "https://app.example.com" || len(creds) != 1 || creds[0] != "true" || len(vary) != 1 || vary[0] != "Origin" {
				t.Errorf("Allow-Origin %q, Allow-Credentials %q, Vary %q: want each once", origin, creds, vary)
			}
		})
	}
}
