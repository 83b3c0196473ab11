package cors_test

import (
	"net/http"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/cors"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
)

// TestThroughTheEngine: a preflight is answered by the proxy and never reaches the backend; an
// actual request does, and its response carries the CORS headers instead of the backend's.
func TestThroughTheEngine(t *testing.T) {
	h := filtertest.Start(t, []*irv1.ModuleConfig{core.MustConfig(cors.ModuleID, cors.Config{
		AllowOrigins: []string{"https://*.example.com"}, AllowMethods: []string{"PUT"}, AllowCredentials: true, MaxAge: 60})},
		filtertest.Options{Backend: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Access-Control-Allow-Origin", "https://backend.invalid")
			_, _ = w.Write([]byte("backend"))
		}})

	req, _ := h.NewRequest(http.MethodOptions, "/api", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "PUT")
	ex := h.Do(t, req)
	if ex.Upstream != nil {
		t.Fatal("the preflight reached the backend")
	}
	if ex.Status != http.StatusNoContent || ex.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		ex.Header.Get("Access-Control-Allow-Methods") != "PUT" || ex.Header.Get("Access-Control-Max-Age") != "60" ||
		ex.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("preflight answer %d %v", ex.Status, ex.Header)
	}

	req, _ = h.NewRequest(http.MethodPut, "/api", nil)
	req.Header.Set("Origin", "https://app.example.com")
	ex = h.Do(t, req)
	if ex.Upstream == nil || string(ex.Body) != "backend" {
		t.Fatalf("the actual request did not reach the backend: %d %q", ex.Status, ex.Body)
	}
	if got := ex.Header.Values("Access-Control-Allow-Origin"); len(got) != 1 || got[0] != "https://app.example.com" {
		t.Errorf("Access-Control-Allow-Origin = %q, want only the request's origin", got)
	}
	if ex.Header.Get("Vary") != "Origin" {
		t.Errorf("Vary = %q", ex.Header.Get("Vary"))
	}

	req, _ = h.NewRequest(http.MethodGet, "/api", nil)
	req.Header.Set("Origin", "https://evil.test")
	ex = h.Do(t, req)
	if ex.Upstream == nil {
		t.Fatal("a request from another origin must still reach the backend (the browser decides)")
	}
	if got := ex.Header.Get("Access-Control-Allow-Origin"); got != "https://backend.invalid" {
		t.Errorf("Access-Control-Allow-Origin = %q: another origin's response is left as the backend made it", got)
	}
}
