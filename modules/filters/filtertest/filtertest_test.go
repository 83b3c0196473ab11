package filtertest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/filters/redirect"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

func filters(mcs ...*irv1.ModuleConfig) []*irv1.ModuleConfig { return mcs }

// TestBackendSees: a request filter's change reaches the real backend; the method, target, body
// and headers the client sent are recorded as received.
func TestBackendSees(t *testing.T) {
	h := filtertest.Start(t, filters(core.MustConfig(headers.RequestModuleID,
		headers.Config{Set: []headers.Header{{Name: "X-Added", Value: "yes"}}})), filtertest.Options{})
	req, err := h.NewRequest(http.MethodPost, "/a%2Fb/c?q=1", strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Client", "c")
	ex := h.Do(t, req)
	if ex.Status != http.StatusOK || string(ex.Body) != "ok" {
		t.Fatalf("response %d %q, want 200 ok", ex.Status, ex.Body)
	}
	up := ex.Upstream
	if up == nil {
		t.Fatal("the backend received nothing")
	}
	if up.Method != http.MethodPost || up.RequestURI != "/a%2Fb/c?q=1" || up.Path != "/a/b/c" || up.RawQuery != "q=1" {
		t.Errorf("backend saw %s %q (path %q, query %q)", up.Method, up.RequestURI, up.Path, up.RawQuery)
	}
	if up.Header.Get("X-Added") != "yes" || up.Header.Get("X-Client") != "c" || string(up.Body) != "hello" {
		t.Errorf("backend saw headers %v and body %q", up.Header, up.Body)
	}
	if up.Host != h.Addr {
		t.Errorf("backend saw Host %q, want the proxy's %q", up.Host, h.Addr)
	}
}

// TestFilterAnswers: a filter that answers itself leaves Upstream nil, and the response is the
// filter's, not followed.
func TestFilterAnswers(t *testing.T) {
	h := filtertest.Start(t, filters(core.MustConfig(redirect.ModuleID,
		redirect.Config{Hostname: "elsewhere.example", StatusCode: 301})), filtertest.Options{})
	ex := h.Get(t, "/x")
	if ex.Upstream != nil {
		t.Errorf("the backend received %+v", ex.Upstream)
	}
	if ex.Status != http.StatusMovedPermanently || !strings.Contains(ex.Header.Get("Location"), "elsewhere.example") {
		t.Errorf("response %d Location %q, want a 301 to elsewhere.example", ex.Status, ex.Header.Get("Location"))
	}
}

// TestExplicitModules: with Options.Modules the registry holds only those (plus the harness's
// own), so a filter left out is a rejected snapshot naming the missing module.
func TestExplicitModules(t *testing.T) {
	mc := core.MustConfig(headers.RequestModuleID, headers.Config{Remove: []string{"X-A"}})
	_, err := filtertest.Apply(t, filters(mc), filtertest.Options{Modules: []core.Module{(*redirect.Redirect)(nil)}})
	if err == nil || !strings.Contains(err.Error(), headers.RequestModuleID) {
		t.Errorf("Apply with the module missing: error = %v, want one naming %s", err, headers.RequestModuleID)
	}
	h, err := filtertest.Apply(t, filters(mc), filtertest.Options{Modules: []core.Module{(*headers.RequestModifier)(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := h.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("X-A", "1")
	if ex := h.Do(t, req); ex.Upstream == nil || ex.Upstream.Header.Get("X-A") != "" {
		t.Errorf("X-A reached the backend: %+v", ex.Upstream)
	}
}

// TestInvalidConfig: the engine's strict decoding is what the harness applies.
func TestInvalidConfig(t *testing.T) {
	mc := core.MustConfig(headers.RequestModuleID, nil)
	mc.Json = []byte(`{"sett":[]}`)
	if _, err := filtertest.Apply(t, filters(mc), filtertest.Options{}); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("error = %v, want an unknown field", err)
	}
}

// TestOptions: hostname, match and backend handler are honoured; a request outside the route is
// the engine's 404 and reaches no backend.
func TestOptions(t *testing.T) {
	h := filtertest.Start(t, nil, filtertest.Options{
		Hostname: "app.example",
		Match:    &httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchExact, Value: "/only"}},
		Backend: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-From", "backend")
			w.WriteHeader(http.StatusTeapot)
		},
	})
	req, _ := h.NewRequest(http.MethodGet, "/only", nil)
	req.Host = "app.example"
	ex := h.Do(t, req)
	if ex.Status != http.StatusTeapot || ex.Header.Get("X-From") != "backend" || ex.Upstream == nil {
		t.Errorf("matched request: %d %v, upstream %v", ex.Status, ex.Header, ex.Upstream)
	}
	for _, tc := range []struct{ host, target string }{{"app.example", "/other"}, {"other.example", "/only"}} {
		req, _ := h.NewRequest(http.MethodGet, tc.target, nil)
		req.Host = tc.host
		if ex := h.Do(t, req); ex.Status != http.StatusNotFound || ex.Upstream != nil {
			t.Errorf("%s%s: %d, upstream %v; want 404 and no backend request", tc.host, tc.target, ex.Status, ex.Upstream)
		}
	}
}

// TestReapply: a test can apply a changed snapshot to the running harness (a filter's state
// across snapshots is tested this way) and keeps the same address.
func TestReapply(t *testing.T) {
	h := filtertest.Start(t, nil, filtertest.Options{})
	if ex := h.Get(t, "/"); ex.Upstream == nil || ex.Upstream.Header.Get("X-V") != "" {
		t.Fatalf("first snapshot: %+v", ex)
	}
	snap, err := filtertest.Snapshot(filters(core.MustConfig(headers.RequestModuleID,
		headers.Config{Set: []headers.Header{{Name: "X-V", Value: "2"}}})), filtertest.Options{}, h.BackendPort)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Proxy.Apply(t.Context(), snap); err != nil {
		t.Fatal(err)
	}
	if ex := h.Get(t, "/"); ex.Upstream == nil || ex.Upstream.Header.Get("X-V") != "2" {
		t.Errorf("second snapshot: the backend saw %+v, want X-V: 2", ex.Upstream)
	}
}
