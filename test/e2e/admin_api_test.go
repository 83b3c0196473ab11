package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestServeAdminAPI runs `coxswain serve` on examples/quickstart (its ports moved to free ones)
// and reads the admin API a newcomer's console uses: health, the routing index, the Gateway's
// routing and problems, and checks that the API refuses writes.
func TestServeAdminAPI(t *testing.T) {
	s := startServe(t, exampleFiles(t, "quickstart", map[string]int{"port: 8080": freePort(t), "port: 8443": freePort(t)}))
	getJSON := func(path string, v any) {
		t.Helper()
		body, code, err := s.adminGet(path)
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s: %d %v %s", path, code, err, body)
		}
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: %v: %s", path, err, body)
		}
	}
	var h struct {
		Component string `json:"component"`
		Ready     bool   `json:"ready"`
	}
	getJSON("/api/v1/health", &h)
	if h.Component != "serve" || !h.Ready {
		t.Errorf("health %+v", h)
	}
	var idx struct {
		Gateways []struct {
			Namespace, Name string
			Routes          int
		}
	}
	getJSON("/api/v1/routing", &idx)
	if len(idx.Gateways) != 1 || idx.Gateways[0].Name != "quickstart" || idx.Gateways[0].Routes != 5 {
		t.Errorf("routing index %+v", idx)
	}
	var gw struct {
		Listeners []struct {
			Name  string
			Binds []string
		}
		Routes []struct {
			Name  string
			Rules []struct{ Name string }
		}
	}
	getJSON("/api/v1/routing/default/quickstart", &gw)
	if len(gw.Listeners) != 2 || len(gw.Listeners[0].Binds) != 1 || len(gw.Routes) != 5 {
		t.Errorf("gateway %+v", gw)
	}
	for _, r := range gw.Routes {
		if len(r.Rules) == 0 {
			t.Errorf("route %s has no compiled rules", r.Name)
		}
	}
	var ps struct {
		Problems []any `json:"problems"`
	}
	getJSON("/api/v1/problems", &ps)
	if ps.Problems == nil || len(ps.Problems) != 0 {
		t.Errorf("the quickstart has problems: %+v", ps.Problems)
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+s.admin+"/api/v1/routing", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
}
