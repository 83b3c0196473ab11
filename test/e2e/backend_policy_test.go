package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// startEchoLike serves what examples/quickstart/echo serves, as far as examples/backend-policy
// relies on it: the backend's name in X-Echo-Backend, and a path ending in /status/<code>
// answered with that status. hits counts the requests it received.
func startEchoLike(t *testing.T, name string, hits *atomic.Int64) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("X-Echo-Backend", name)
		if i := strings.LastIndex(r.URL.Path, "/status/"); i >= 0 {
			if code, err := strconv.Atoi(r.URL.Path[i+len("/status/"):]); err == nil {
				w.WriteHeader(code)
			}
		}
		_, _ = fmt.Fprintf(w, "{\"backend\":%q}\n", name)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// TestExamplesBackendPolicyTry runs examples/backend-policy/try.sh --run against `coxswain serve
// -f examples/backend-policy`, as a newcomer would, and checks each feature answers as the
// script's comments say.
func TestExamplesBackendPolicyTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	port := freePort(t)
	var paymentHits atomic.Int64
	ports := map[string]int{"port: 8095": port}
	for i, name := range []string{"shop-a", "shop-b", "shop-c"} {
		ports[fmt.Sprintf("port: %d", 9351+i)] = startEchoLike(t, name, new(atomic.Int64))
	}
	paymentsPort := startEchoLike(t, "payments", &paymentHits)
	ports["port: 9354"] = paymentsPort
	s := startServe(t, exampleFiles(t, "backend-policy", ports))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "examples/backend-policy served", func() error {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", base+"/shop/").Output()
		if err != nil || string(out) != "200" {
			return fmt.Errorf("GET /shop/: %s %v", out, err)
		}
		return nil
	})
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "examples", "backend-policy", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), "POLICY_BASE="+base, "POLICY_ADMIN=http://"+s.admin, "COXSWAIN="+binary, "TMPDIR="+t.TempDir())
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, raw)
	}
	out := string(raw)
	lower := strings.ToLower(out)
	for _, want := range []string{
		"set-cookie: shop-session=",
		"path=/; httponly",
		"500 500 500 500 500 503 503 503", // the breaker opens after minRequests failures
		"circuit breaker open",
		fmt.Sprintf(`coxswain_proxy_circuit_breaker_state{route="httproute/default/backend-policy",upstream="127.0.0.1:%d"} 1`, paymentsPort),
		"conflicted",     // shop-fast loses to shop
		"targetnotfound", // legacy-v2
		"fastest",        // the ignored algorithm, named
		"5 seconds",      // the ignored duration, named
	} {
		if !strings.Contains(lower, want) {
			t.Errorf("try.sh --run output lacks %q:\n%s", want, out)
		}
	}
	// Once open, the breaker answered without the backend: 5 requests reached it, not 9.
	if n := paymentHits.Load(); n != 5 {
		t.Errorf("the payments backend saw %d requests, want 5 (the breaker's 503s must not reach it)", n)
	}
	// The cookie pins: six requests with it, one backend.
	if m := regexp.MustCompile(`(shop-[abc]) (shop-[abc]) (shop-[abc]) (shop-[abc]) (shop-[abc]) (shop-[abc])`).FindStringSubmatch(out); m == nil {
		t.Errorf("no line of six backends in the output:\n%s", out)
	} else {
		for _, b := range m[2:] {
			if b != m[1] {
				t.Errorf("requests with the cookie reached %v, want one backend", m[1:])
				break
			}
		}
	}
	// The header hash: each user on one backend, both times.
	seen := map[string]string{}
	for _, m := range regexp.MustCompile(`(alice|bob|carol)=(shop-[abc])`).FindAllStringSubmatch(out, -1) {
		if prev, ok := seen[m[1]]; ok && prev != m[2] {
			t.Errorf("x-user %s reached %s and %s", m[1], prev, m[2])
		}
		seen[m[1]] = m[2]
	}
	if len(seen) != 3 {
		t.Errorf("header hash lines missing from the output:\n%s", out)
	}
}

// TestBackendPolicyPinsAcrossProcesses runs two `coxswain serve` processes on the same manifests
// and session key file, as two proxy replicas fed the same snapshot: a cookie one of them set,
// and a header value, take a client to the same backend on both. A pinned backend that leaves
// the Service is replaced, and the client re-pinned with a new cookie.
func TestBackendPolicyPinsAcrossProcesses(t *testing.T) {
	names := []string{"pod-a", "pod-b", "pod-c", "pod-d"}
	backendPorts := map[string]int{}
	var slices strings.Builder
	for _, n := range names {
		backendPorts[n] = startEchoLike(t, n, new(atomic.Int64))
		slices.WriteString(sliceYAML("sticky", n, backendPorts[n]))
	}
	keyFile := filepath.Join(t.TempDir(), "session.key")
	writeFile(t, keyFile, "0123456789abcdef0123456789abcdef")
	files := func(port int) map[string]string {
		return map[string]string{
			"gateway.yaml":  gatewayClassYAML + "---\n" + gatewayYAML(listener{name: "http", protocol: "HTTP", port: port}) + "---\n" + routeYAML("pins", "", pinsRouteYAML),
			"backends.yaml": bareServiceYAML("sticky") + slices.String() + bareServiceYAML("byheader") + strings.ReplaceAll(slices.String(), "sticky", "byheader"),
			"policies.yaml": `apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: CoxswainBackendPolicy
metadata: {name: sticky}
spec:
  targetRefs: [{group: "", kind: Service, name: sticky}]
  sessionPersistence: {type: Cookie, sessionName: pin}
---
apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: CoxswainBackendPolicy
metadata: {name: byheader}
spec:
  targetRefs: [{group: "", kind: Service, name: byheader}]
  sessionPersistence: {type: Header, sessionName: x-tenant}
`,
		}
	}
	portA, portB := freePort(t), freePort(t)
	a := startServe(t, files(portA), "--session-key-file", keyFile)
	startServe(t, files(portB), "--session-key-file", keyFile)
	ctx := context.Background()
	get := func(port int, path string, headers map[string]string) *result {
		t.Helper()
		var res *result
		eventually(t, 10*time.Second, "GET "+path, func() error {
			var err error
			res, err = do(ctx, noRedirect, request{url: fmt.Sprintf("http://127.0.0.1:%d%s", port, path), headers: headers})
			if err == nil && res.code != http.StatusOK {
				err = fmt.Errorf("status %d: %s", res.code, res.body)
			}
			return err
		})
		return res
	}

	first := get(portA, "/sticky/", nil)
	cookie := first.header.Get("Set-Cookie")
	pinned := first.header.Get("X-Echo-Backend")
	if !strings.HasPrefix(cookie, "pin=") || !strings.HasSuffix(cookie, "; Path=/; HttpOnly") {
		t.Fatalf("Set-Cookie = %q, want pin=<token>; Path=/; HttpOnly", cookie)
	}
	token := strings.TrimPrefix(strings.SplitN(cookie, ";", 2)[0], "pin=")
	if strings.Contains(token, strconv.Itoa(backendPorts[pinned])) || strings.Contains(token, "127.0.0.1") {
		t.Errorf("the token %q shows the backend's address", token)
	}
	for i := range 20 {
		port := []int{portA, portB}[i%2]
		res := get(port, "/sticky/", map[string]string{"Cookie": "pin=" + token})
		if got := res.header.Get("X-Echo-Backend"); got != pinned {
			t.Fatalf("request %d with the cookie reached %s on port %d, want %s", i, got, port, pinned)
		}
		if sc := res.header.Get("Set-Cookie"); sc != "" {
			t.Errorf("request %d with a valid cookie was given another: %s", i, sc)
		}
	}
	for _, tenant := range []string{"t1", "t2", "t3", "t4", "t5"} {
		h := map[string]string{"X-Tenant": tenant}
		onA, onB := get(portA, "/byheader/", h).header.Get("X-Echo-Backend"), get(portB, "/byheader/", h).header.Get("X-Echo-Backend")
		if onA != onB {
			t.Errorf("x-tenant %s reached %s on one proxy and %s on the other", tenant, onA, onB)
		}
	}

	// The pinned backend leaves the Service on proxy A: the cookie now takes the client elsewhere,
	// with a fresh cookie for the new backend.
	var rest strings.Builder
	for _, n := range names {
		if n != pinned {
			rest.WriteString(sliceYAML("sticky", n, backendPorts[n]))
		}
	}
	a.replace("backends.yaml", bareServiceYAML("sticky")+rest.String()+bareServiceYAML("byheader")+strings.ReplaceAll(slices.String(), "sticky", "byheader"))
	eventually(t, 10*time.Second, "re-pinned after the pinned backend left", func() error {
		res := get(portA, "/sticky/", map[string]string{"Cookie": "pin=" + token})
		got, sc := res.header.Get("X-Echo-Backend"), res.header.Get("Set-Cookie")
		if got == pinned {
			return fmt.Errorf("still reaches %s", got)
		}
		if !strings.HasPrefix(sc, "pin=") || sc == cookie {
			return fmt.Errorf("reached %s with Set-Cookie %q, want a new pin", got, sc)
		}
		return nil
	})
}

// pinsRouteYAML routes /sticky and /byheader of Gateway gw to the Services of the same names.
const pinsRouteYAML = `  rules:
  - matches: [{path: {type: PathPrefix, value: /sticky}}]
    backendRefs: [{name: sticky, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /byheader}}]
    backendRefs: [{name: byheader, port: 80}]
`

// bareServiceYAML is a Service whose EndpointSlices come separately (sliceYAML).
func bareServiceYAML(name string) string {
	return fmt.Sprintf("---\napiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec: {ports: [{name: http, port: 80}]}\n", name)
}

// sliceYAML is one EndpointSlice of Service svc with the one backend on port.
func sliceYAML(svc, pod string, port int) string {
	return fmt.Sprintf(`---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s-%s
  labels: {kubernetes.io/service-name: %s}
addressType: IPv4
ports: [{name: http, port: %d}]
endpoints: [{addresses: ["127.0.0.1"]}]
`, svc, pod, svc, port)
}
