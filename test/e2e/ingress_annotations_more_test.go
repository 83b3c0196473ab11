package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
)

// moreBackends are the backends examples/ingress/more-annotations.yaml adds to backends.yaml's.
type moreBackends struct {
	flakyHits atomic.Int64 // requests the always-503 endpoint of the flaky Service answered
	mu        sync.Mutex
	mirrored  []string // paths the shadow (mirror) backend received
}

func (m *moreBackends) mirroredPaths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.mirrored...)
}

// serveOn starts an HTTP server with h on a loopback port and returns the port.
func serveOn(t *testing.T, h http.HandlerFunc) int {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// startMoreIngressExample serves examples/ingress (all of it, more-annotations.yaml included)
// with the four echo backends, a backend that always answers 503, one that answers only after
// the client gave up, a mirror backend that records what it gets and the demo auth service.
func startMoreIngressExample(t *testing.T) (string, *moreBackends, *server) {
	t.Helper()
	m := &moreBackends{}
	ports := map[string]int{}
	for i, n := range []string{"api", "exact", "wild", "default"} {
		ports["port: "+strconv.Itoa(9101+i)] = startBackend(t, n).port
	}
	ports["port: 9105"] = serveOn(t, func(w http.ResponseWriter, _ *http.Request) {
		m.flakyHits.Add(1)
		w.Header().Set("X-Backend", "flaky")
		http.Error(w, "flaky is down", http.StatusServiceUnavailable)
	})
	ports["port: 9106"] = serveOn(t, func(w http.ResponseWriter, r *http.Request) {
		select { // far longer than the example's 300ms timeouts; the proxy hanging up ends it
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
		w.Header().Set("X-Backend", "slow")
	})
	ports["port: 9107"] = serveOn(t, func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.mirrored = append(m.mirrored, r.Host+" "+r.URL.Path)
		m.mu.Unlock()
		w.Header().Set("X-Backend", "shadow")
	})
	ports["port: 9108"] = startDemoAuth(t)
	httpPort := freePort(t)
	s := startServe(t, exampleFiles(t, "ingress", ports),
		"--ingress-http-address", fmt.Sprintf("127.0.0.1:%d", httpPort),
		"--ingress-https-address", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	return fmt.Sprintf("http://127.0.0.1:%d", httpPort), m, s
}

// send makes one request with an optional body (chunked when length is -1) and returns the
// response with its body read, undecoded.
func send(t *testing.T, method, url, host string, body []byte, length int64, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
		if length < 0 {
			rd = io.MultiReader(rd) // hides the length: the request goes chunked
		}
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil && length >= 0 {
		req.ContentLength = length
	}
	req.Host = host
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, url, host, err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// TestExamplesIngressTimeouts: read-timeout (per attempt) and send-timeout (whole request) both
// answer 504 when the backend takes longer, well before the backend would answer.
func TestExamplesIngressTimeouts(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	for _, host := range []string{"timeout.more.test", "deadline.more.test"} {
		expectStatus(t, base, host, "/", nil, http.StatusGatewayTimeout, "")
		start := time.Now()
		res, err := do(context.Background(), noRedirect, request{url: base + "/", host: host})
		if err != nil || res.code != http.StatusGatewayTimeout {
			t.Fatalf("%s: %+v %v", host, res, err)
		}
		// The backend answers after 20s; the 10s client would have failed instead of a 504.
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: the 504 took %s for a 300ms timeout", host, d)
		}
	}
}

// TestExamplesIngressRetry: with retry 2 on 503, requests to a Service with one endpoint that
// always answers 503 all end at the other endpoint with 200 (a retry avoids the endpoints
// already tried), and the broken one was tried.
func TestExamplesIngressRetry(t *testing.T) {
	base, m, _ := startMoreIngressExample(t)
	expectStatus(t, base, "retry.more.test", "/", nil, http.StatusOK, "api")
	for i := range 20 {
		res, err := do(context.Background(), noRedirect, request{url: base + "/r" + strconv.Itoa(i), host: "retry.more.test"})
		if err != nil || res.code != http.StatusOK || res.backendOf() != "api" {
			t.Fatalf("request %d: %+v %v", i, res, err)
		}
	}
	if m.flakyHits.Load() == 0 {
		t.Error("the 503 endpoint was never tried: the retries were not exercised")
	}
}

// TestExamplesIngressRewrite: rewrite-target with use-regex fills $1/$2 from the path's groups;
// without use-regex it replaces the Prefix path.
func TestExamplesIngressRewrite(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	for _, c := range []struct{ host, path, upstream string }{
		{"rewrite.more.test", "/api/v1/users", "/users/v1"},
		{"rewrite.more.test", "/api/v2/a/b", "/a/b/v2"},
		{"prefix.more.test", "/old/x", "/new/x"},
		{"prefix.more.test", "/old", "/new"},
	} {
		res := expectStatus(t, base, c.host, c.path, nil, http.StatusOK, "api")
		if res.echo.Path != c.upstream {
			t.Errorf("%s%s reached the backend as %s, want %s", c.host, c.path, res.echo.Path, c.upstream)
		}
	}
	// A path the expression does not match is not this Ingress's: the app Ingress's defaultBackend.
	expectStatus(t, base, "rewrite.more.test", "/api/vx/users", nil, http.StatusOK, "default")
}

// TestExamplesIngressHeaders: the request-header-* annotations change what the backend gets,
// the response-header-* ones what the client gets.
func TestExamplesIngressHeaders(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	res := expectStatus(t, base, "headers.more.test", "/", map[string]string{"x-debug": "1", "x-env": "dev", "x-trace": "client"}, http.StatusOK, "api")
	got := http.Header(res.echo.Headers)
	if got.Get("X-Env") != "prod" || got.Get("X-Team") != "web" || got.Get("X-Debug") != "" {
		t.Errorf("backend headers %v: want x-env prod, x-team web, no x-debug", got)
	}
	if tr := got.Values("X-Trace"); len(tr) != 2 || tr[0] != "client" || tr[1] != "on" {
		t.Errorf("backend x-trace %q, want [client on] (added, not replaced)", tr)
	}
	if res.header.Get("Cache-Control") != "no-store" || res.header.Get("X-Served-By") != "coxswain" || res.header.Get("X-Backend") != "" {
		t.Errorf("response headers %v: want cache-control no-store, x-served-by coxswain, no x-backend", res.header)
	}
}

// TestExamplesIngressRedirects: the redirect-* annotations answer with their status and
// Location instead of proxying; ssl-redirect sends HTTP to https on 443 with its code.
func TestExamplesIngressRedirects(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	res := expectStatus(t, base, "redirect.more.test", "/a/b", nil, http.StatusMovedPermanently, "")
	if loc := res.header.Get("Location"); loc != "https://www.more.test:8443/moved" {
		t.Errorf("redirect Location %q", loc)
	}
	res = expectStatus(t, base, "ssl.more.test", "/x/y", nil, http.StatusMovedPermanently, "")
	if loc := res.header.Get("Location"); loc != "https://ssl.more.test/x/y" {
		t.Errorf("ssl-redirect Location %q", loc)
	}
}

// TestExamplesIngressMaxBodySize: a body over max-body-size (1K) is 413, by Content-Length or
// chunked, and never reaches the backend; a smaller one does.
func TestExamplesIngressMaxBodySize(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	expectStatus(t, base, "body.more.test", "/", nil, http.StatusOK, "api")
	small, large := bytes.Repeat([]byte("a"), 512), bytes.Repeat([]byte("a"), 4096)
	if res, b := send(t, "POST", base+"/", "body.more.test", small, int64(len(small)), nil); res.StatusCode != http.StatusOK || res.Header.Get("X-Backend") != "api" {
		t.Errorf("512 bytes: %d %s", res.StatusCode, b)
	}
	for _, length := range []int64{int64(len(large)), -1} {
		if res, b := send(t, "POST", base+"/", "body.more.test", large, length, nil); res.StatusCode != http.StatusRequestEntityTooLarge || res.Header.Get("X-Backend") != "" {
			t.Errorf("4096 bytes (length %d): %d %s", length, res.StatusCode, b)
		}
	}
}

// TestExamplesIngressMirror: mirror-target sends a copy of each request to the shadow Service
// while the client gets the api backend's answer.
func TestExamplesIngressMirror(t *testing.T) {
	base, m, _ := startMoreIngressExample(t)
	expectStatus(t, base, "mirror.more.test", "/copy/me", nil, http.StatusOK, "api")
	eventually(t, 10*time.Second, "the mirror backend got /copy/me", func() error {
		for _, p := range m.mirroredPaths() {
			if strings.HasSuffix(p, " /copy/me") {
				return nil
			}
		}
		return fmt.Errorf("mirror got %q", m.mirroredPaths())
	})
}

// TestExamplesIngressIPAccessControl: ip-access-control denies 127.0.0.1, the test's address.
func TestExamplesIngressIPAccessControl(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	res := expectStatus(t, base, "denied.more.test", "/", nil, http.StatusForbidden, "")
	if res.echo != nil {
		t.Errorf("the backend answered a denied client: %+v", res.echo)
	}
	// The Ingress next to it, from the same address, is served.
	expectStatus(t, base, "headers.more.test", "/", nil, http.StatusOK, "api")
}

// TestExamplesIngressRateLimit: rate-limit admits 3 requests a minute from one client; the next
// is 429 with Retry-After and does not reach the backend.
func TestExamplesIngressRateLimit(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	// Until the Ingress is served the app Ingress's defaultBackend answers; the first request
	// the limit sees is admitted.
	expectStatus(t, base, "limited.more.test", "/", nil, http.StatusOK, "api")
	admitted := 1
	for range 10 {
		res, err := do(context.Background(), noRedirect, request{url: base + "/", host: "limited.more.test"})
		if err != nil {
			t.Fatal(err)
		}
		if res.code == http.StatusTooManyRequests {
			if res.echo != nil || res.header.Get("Retry-After") == "" {
				t.Errorf("429 %+v %v", res.echo, res.header)
			}
			if admitted > 3 {
				t.Errorf("%d requests admitted before the 429, want at most 3", admitted)
			}
			return
		}
		if res.code != http.StatusOK {
			t.Fatalf("status %d %s", res.code, res.body)
		}
		admitted++
	}
	t.Fatalf("%d requests admitted and no 429", admitted)
}

// TestExamplesIngressBasicAuth: auth-basic answers 401 with a Basic challenge without valid
// credentials and passes the right ones, without the Authorization header, to the backend.
func TestExamplesIngressBasicAuth(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	res := expectStatus(t, base, "basic.more.test", "/", nil, http.StatusUnauthorized, "")
	if !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Basic") || res.echo != nil {
		t.Errorf("401 %v %+v", res.header, res.echo)
	}
	basic := func(user, pass string) map[string]string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pass)
		return map[string]string{"Authorization": req.Header.Get("Authorization")}
	}
	expectStatus(t, base, "basic.more.test", "/", basic("admin", "wrong"), http.StatusUnauthorized, "")
	res = expectStatus(t, base, "basic.more.test", "/", basic("admin", "coxswain-demo"), http.StatusOK, "api")
	if res.echo.Headers["Authorization"] != nil {
		t.Errorf("the backend got the credentials: %v", res.echo.Headers)
	}
}

// TestExamplesIngressJwt: auth-jwt passes a token of the demo key for the example's audience,
// with its sub as x-user-id, and answers 401 to no token and to another audience's.
func TestExamplesIngressJwt(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	key := demoKey(t)
	bearer := func(aud string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + key.Sign(jwttest.Claims("https://demo.coxswain.invalid", aud, map[string]any{"sub": "alice"}))}
	}
	res := expectStatus(t, base, "jwt.more.test", "/", nil, http.StatusUnauthorized, "")
	if !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without a Bearer challenge: %v", res.header)
	}
	expectStatus(t, base, "jwt.more.test", "/", bearer("filters-example"), http.StatusUnauthorized, "")
	res = expectStatus(t, base, "jwt.more.test", "/", bearer("ingress-example"), http.StatusOK, "api")
	if got := http.Header(res.echo.Headers); got.Get("X-User-Id") != "alice" || got.Get("Authorization") != "" {
		t.Errorf("backend headers %v: want x-user-id alice and no token", got)
	}
}

// TestExamplesIngressExtAuth: ext-auth asks the auth Service; its 401 and body go back to the
// client, its 2xx lets the request through with the allowed X-Auth-User header.
func TestExamplesIngressExtAuth(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	res := expectStatus(t, base, "extauth.more.test", "/private", map[string]string{"X-Auth-User": "mallory"}, http.StatusUnauthorized, "")
	if !strings.Contains(res.body, "a valid bearer token is required for GET /private") || res.header.Get("WWW-Authenticate") == "" {
		t.Errorf("the auth service's denial did not reach the client: %v %q", res.header, res.body)
	}
	res = expectStatus(t, base, "extauth.more.test", "/private",
		map[string]string{"Authorization": "Bearer demo-token-alice", "X-Auth-User": "mallory"}, http.StatusOK, "api")
	if got := http.Header(res.echo.Headers).Values("X-Auth-User"); len(got) != 1 || got[0] != "alice" {
		t.Errorf("backend X-Auth-User %q, want [alice] (the auth service's, not the client's)", got)
	}
}

// TestExamplesIngressCompression: compression gzips the backend's JSON for a client that
// accepts gzip, and leaves it alone for one that does not.
func TestExamplesIngressCompression(t *testing.T) {
	base, _, _ := startMoreIngressExample(t)
	expectStatus(t, base, "gzip.more.test", "/", nil, http.StatusOK, "api")
	res, b := send(t, "GET", base+"/", "gzip.more.test", nil, 0, map[string]string{"Accept-Encoding": "gzip"})
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("status %d, Content-Encoding %q", res.StatusCode, res.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var e echo
	if err := json.NewDecoder(zr).Decode(&e); err != nil || e.Backend != "api" {
		t.Errorf("gunzipped body: %+v %v", e, err)
	}
	res, _ = send(t, "GET", base+"/", "gzip.more.test", nil, 0, map[string]string{"Accept-Encoding": "identity"})
	if res.Header.Get("Content-Encoding") != "" {
		t.Errorf("Content-Encoding %q for a client that accepts none", res.Header.Get("Content-Encoding"))
	}
}

// TestExamplesIngressMoreProblems: more-annotations.yaml is served without a problem, a warning
// or a failed condition: no annotation of it was ignored (an invalid value would be a warning),
// so the tests above exercise what the annotations ask.
func TestExamplesIngressMoreProblems(t *testing.T) {
	base, _, s := startMoreIngressExample(t)
	expectStatus(t, base, "gzip.more.test", "/", nil, http.StatusOK, "api")
	body, code, err := s.adminGet("/status")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/status: %d %v", code, err)
	}
	var st struct {
		ApplyError string `json:"applyError"`
		Report     struct {
			Problems   []map[string]any `json:"problems"`
			Warnings   []map[string]any `json:"warnings"`
			LoadErrors []map[string]any `json:"loadErrors"`
			Failures   []string         `json:"failures"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/status: %v in %s", err, body)
	}
	if st.ApplyError != "" {
		t.Errorf("apply error %q", st.ApplyError)
	}
	for _, list := range [][]map[string]any{st.Report.Problems, st.Report.Warnings, st.Report.LoadErrors} {
		for _, p := range list {
			if strings.Contains(fmt.Sprint(p), "more-annotations.yaml") {
				t.Errorf("reported: %v", p)
			}
		}
	}
	for _, f := range st.Report.Failures {
		if strings.Contains(f, "more-annotations.yaml") || strings.Contains(f, ".more.test") {
			t.Errorf("failure: %s", f)
		}
	}
}
