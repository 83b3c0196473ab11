package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an echo-like backend (its name in X-Echo-Backend) that remembers the method and
// path of every request it receives.
type recorder struct {
	mu   sync.Mutex
	reqs []string // "METHOD /path"
}

func (rec *recorder) start(t *testing.T, name string) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.reqs = append(rec.reqs, r.Method+" "+r.URL.Path)
		rec.mu.Unlock()
		w.Header().Set("X-Echo-Backend", name)
		_, _ = fmt.Fprintf(w, "{\"backend\":%q}\n", name)
	}))
	t.Cleanup(srv.Close)
	return portOf(t, srv)
}

func portOf(t *testing.T, s *httptest.Server) int {
	t.Helper()
	var port int
	if _, err := fmt.Sscanf(s.Listener.Addr().String()[strings.LastIndexByte(s.Listener.Addr().String(), ':')+1:], "%d", &port); err != nil {
		t.Fatal(err)
	}
	return port
}

// count is how many requests began with prefix ("GET /checkout").
func (rec *recorder) count(prefix string) int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	n := 0
	for _, r := range rec.reqs {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

// TestExamplesMirrorCORSTry runs examples/mirror-cors/try.sh --run against `coxswain serve -f
// examples/mirror-cors`, and checks what the app and shadow backends received as well as what
// the script printed.
func TestExamplesMirrorCORSTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	port := freePort(t)
	app, shadow := &recorder{}, &recorder{}
	ports := map[string]int{"port: 8098": port, "port: 9371": app.start(t, "app"), "port: 9372": shadow.start(t, "shadow")}
	s := startServe(t, exampleFiles(t, "mirror-cors", ports))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "examples/mirror-cors served", func() error {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", base+"/api/ready").Output()
		if err != nil || string(out) != "200" {
			return fmt.Errorf("GET /api/ready: %s %v", out, err)
		}
		return nil
	})
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "examples", "mirror-cors", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), "MIRROR_BASE="+base, "MIRROR_ADMIN=http://"+s.admin)
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, raw)
	}
	out := strings.ToLower(string(raw))
	for _, want := range []string{
		"$ curl -s -o /dev/null -w '%header{x-echo-backend}\\n' " + base + "/checkout/cart\napp\n", // the client got app's answer
		`coxswain_proxy_mirror_requests_total{result="sent",route="httproute/default/mirror-cors",upstream="default/shadow:80"}`,
		"http/1.1 204 no content",
		"access-control-allow-origin: https://shop.example.com",
		"access-control-allow-methods: get, put, delete",
		"access-control-allow-credentials: true",
		"access-control-max-age: 600",
		"vary: origin",
		"access-control-expose-headers: x-echo-backend",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("try.sh --run output lacks %q:\n%s", want, raw)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(out), "\n0") {
		t.Errorf("the request from https://evil.test got an access-control-allow-origin:\n%s", raw)
	}
	// The shadow got the /checkout copy and some of the 40 /search ones; app never saw a preflight.
	eventually(t, 10*time.Second, "the /checkout copy at shadow", func() error {
		if n := shadow.count("GET /checkout/cart"); n != 1 {
			return fmt.Errorf("shadow saw %d copies of /checkout/cart, want 1", n)
		}
		return nil
	})
	if n := shadow.count("GET /search"); n < 1 || n > 25 {
		t.Errorf("shadow saw %d of 40 /search requests at 1/4", n)
	}
	if n := shadow.count("GET /api"); n != 0 {
		t.Errorf("shadow saw %d /api requests, which are not mirrored", n)
	}
	if n := app.count("OPTIONS"); n != 0 {
		t.Errorf("app saw %d preflights, want none (the proxy answers them)", n)
	}
	if n := app.count("GET /search"); n != 40 {
		t.Errorf("app saw %d /search requests, want all 40", n)
	}
}
