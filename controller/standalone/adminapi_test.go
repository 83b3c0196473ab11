package standalone

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core/admin"
)

// brokenRoute is a quickstart route whose backend does not exist.
const brokenRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: broken
  namespace: default
spec:
  parentRefs:
    - name: quickstart
  rules:
    - matches:
        - path: {type: PathPrefix, value: /broken}
      backendRefs:
        - name: nowhere
          port: 80
`

// TestAdminAPIQuickstart serves the admin API of examples/quickstart (plus a route with a
// missing backend): health, the routing index and the Gateway's routing with its compiled rules,
// and the broken route in problems with field, hint and file.
func TestAdminAPIQuickstart(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join("..", "..", "examples", "quickstart")
	ents, err := os.ReadDir(src)
	must(t, err)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".yaml") {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			must(t, err)
			must(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600))
		}
	}
	must(t, os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte(brokenRoute), 0o600))
	// As `coxswain serve` runs it: the quickstart's backends are on loopback.
	r := NewRunner(Options{Path: dir, Log: zaptest.NewLogger(t), Engine: &recordingEngine{},
		Translate: translator.Options{AllowLoopbackEndpoints: true, Routability: true}})
	srv := httptest.NewServer(AdminHandler(r, "test"))
	defer srv.Close()
	get := func(path string, want int, v any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		must(t, err)
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != want {
			t.Fatalf("%s: %d, want %d", path, resp.StatusCode, want)
		}
		if v != nil {
			must(t, json.NewDecoder(resp.Body).Decode(v))
		}
	}
	var e admin.Error
	get("/api/v1/routing", http.StatusServiceUnavailable, &e)
	if e.Status != 503 || e.Error == "" {
		t.Errorf("before the first load: %+v", e)
	}
	must(t, r.Reload(context.Background()))

	var h admin.Health
	get("/api/v1/health", 200, &h)
	if h.Component != "serve" || !h.Ready || h.Version != "test" || h.Leader != nil {
		t.Errorf("health %+v", h)
	}
	var idx adminapi.RoutingIndex
	get("/api/v1/routing", 200, &idx)
	if len(idx.Gateways) != 1 || idx.Gateways[0].Name != "quickstart" || idx.Gateways[0].Routes != 6 || idx.Version != r.State().Version {
		t.Errorf("index %+v", idx)
	}
	var g adminapi.GatewayRouting
	get("/api/v1/routing/default/quickstart", 200, &g)
	if len(g.Listeners) != 2 || g.Listeners[1].TLS == nil || g.Listeners[1].TLS.Mode != "TERMINATE" || len(g.Listeners[0].Binds) != 1 {
		t.Errorf("listeners %+v", g.Listeners)
	}
	var headers, app *adminapi.RouteView
	for i := range g.Routes {
		switch g.Routes[i].Name {
		case "headers":
			headers = &g.Routes[i]
		case "app":
			app = &g.Routes[i]
		}
	}
	// The quickstart names the app route's first rule (spec.rules[0].name: app); its other rule
	// has no name.
	ruleNames := map[string]string{}
	for _, rule := range app.Rules {
		ruleNames[rule.Name] = rule.RuleName
	}
	if ruleNames["HTTPRoute/default/app/rule/0/match/0"] != "app" || ruleNames["HTTPRoute/default/app/rule/1/match/0"] != "" {
		t.Errorf("app route rule names %v", ruleNames)
	}
	if headers == nil || len(headers.Rules) == 0 || len(headers.Rules[0].Filters) != 1 ||
		headers.Rules[0].Filters[0].ID != "filter.http.request_header_modifier" || len(headers.Clusters) != 1 || len(headers.Clusters[0].Endpoints) != 1 {
		t.Errorf("headers route %+v", headers)
	}
	get("/api/v1/routing/default/nope", 404, nil)

	var ps adminapi.Problems
	get("/api/v1/problems", 200, &ps)
	if len(ps.Problems) != 1 {
		t.Fatalf("problems %+v", ps.Problems)
	}
	p := ps.Problems[0]
	if p.Object != (adminapi.ObjectRef{Kind: "HTTPRoute", Namespace: "default", Name: "broken"}) || p.Field != "spec.rules[0].backendRefs[0]" ||
		p.Reason != "BackendNotFound" || p.Hint == "" || !strings.HasPrefix(p.Source, filepath.Join(dir, "broken.yaml")) {
		t.Errorf("problem %+v", p)
	}
	resp, err := http.Post(srv.URL+"/api/v1/problems", "application/json", nil)
	must(t, err)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}
