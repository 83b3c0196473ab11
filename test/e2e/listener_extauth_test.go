package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listenerExtAuthManifests is a Gateway whose listener runs Gateway API's inline ExternalAuth
// filter (HTTPExternalAuthFilter) before routing, and an HTTPRoute that routes on the header
// the authorization service sets: identity-driven routing, GEP-5224's motivating case.
const listenerExtAuthManifests = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec: {controllerName: coxswain-labs.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: coxswain
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners:
  - name: http
    protocol: HTTP
    port: PORT
    filters:
      requests:
      - type: ExternalAuth
        externalAuth:
          protocol: HTTP
          backendRef: {name: auth, port: 80}
          http: {allowedResponseHeaders: [X-User]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: by-user}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /app}
      headers: [{name: X-User, value: alice}]
    backendRefs: [{name: alice, port: 80}]
  - matches:
    - path: {type: PathPrefix, value: /app}
    backendRefs: [{name: others, port: 80}]
`

func serviceManifest(name string, port int) string {
	return fmt.Sprintf(`---
apiVersion: v1
kind: Service
metadata: {name: %[1]s}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %[1]s, labels: {kubernetes.io/service-name: %[1]s}}
addressType: IPv4
ports: [{name: http, port: %[2]d}]
endpoints: [{addresses: ["127.0.0.1"]}]
`, name, port)
}

// TestListenerExternalAuth: the inline ExternalAuth listener filter through `coxswain serve`. The
// authorization service sees every request first (routed or not); a denial is relayed and the
// backends never see the request; an allowed request's X-User (and not a client's forged one)
// is what the HTTPRoute matches.
func TestListenerExternalAuth(t *testing.T) {
	var checks atomic.Int64
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checks.Add(1)
		switch r.Header.Get("Authorization") {
		case "Bearer alice":
			w.Header().Set("X-User", "alice")
		case "Bearer bob":
			w.Header().Set("X-User", "bob")
		default:
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("no token"))
		}
	}))
	t.Cleanup(auth.Close)
	authPort := auth.Listener.Addr().(*net.TCPAddr).Port
	port := freePort(t)
	files := map[string]string{"all.yaml": strings.Replace(listenerExtAuthManifests, "PORT", fmt.Sprint(port), 1) +
		serviceManifest("auth", authPort) + serviceManifest("alice", startBackend(t, "alice").port) +
		serviceManifest("others", startBackend(t, "others").port)}
	startServe(t, files)
	get := func(path, token string, extra ...string) (*result, error) {
		h := map[string]string{}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = extra[i+1]
		}
		return do(context.Background(), noRedirect, request{url: fmt.Sprintf("http://127.0.0.1:%d%s", port, path), headers: h})
	}
	eventually(t, 10*time.Second, "alice routed by her identity", func() error {
		res, err := get("/app/x", "alice")
		if err != nil {
			return err
		}
		if res.code != 200 || res.echo == nil || res.echo.Backend != "alice" {
			return fmt.Errorf("got %d %s", res.code, res.body)
		}
		return nil
	})
	for _, tc := range []struct {
		name, path, token string
		extra             []string
		code              int
		backend           string
	}{
		{"bob is not alice", "/app/x", "bob", nil, 200, "others"},
		{"a forged X-User is replaced by the authorizer's", "/app/x", "bob", []string{"X-User", "alice"}, 200, "others"},
		{"no token: the authorizer's denial", "/app/x", "", nil, 403, ""},
		{"no token on a path no route has: still the denial, before routing", "/nowhere", "", nil, 403, ""},
		{"bob on a path no route has: 404 after the check", "/nowhere", "bob", nil, 404, ""},
	} {
		before := checks.Load()
		res, err := get(tc.path, tc.token, tc.extra...)
		switch {
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case res.code != tc.code:
			t.Errorf("%s: status %d, want %d (%s)", tc.name, res.code, tc.code, res.body)
		case tc.backend != "" && (res.echo == nil || res.echo.Backend != tc.backend):
			t.Errorf("%s: answered by %+v, want %s", tc.name, res.echo, tc.backend)
		case tc.backend == "" && res.echo != nil:
			t.Errorf("%s: a backend answered: %+v", tc.name, res.echo)
		case checks.Load() != before+1:
			t.Errorf("%s: the authorization service was asked %d times, want once", tc.name, checks.Load()-before)
		}
	}
}
