package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestExamplesRetriesTry runs examples/retries/try.sh --run against `coxswain serve -f
// examples/retries`, with the Service's echo endpoint on a port of its own and the "crashed"
// endpoint on a port nothing listens on, and checks each behaviour answers as the script's
// comments say.
func TestExamplesRetriesTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	port := freePort(t)
	var hits atomic.Int64
	ports := map[string]int{
		"port: 8098": port,
		"port: 9381": startEchoLike(t, "shop-a", &hits),
		"port: 9382": freePort(t), // released: connections to it are refused
	}
	s := startServe(t, exampleFiles(t, "retries", ports))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "examples/retries served", func() error {
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
	hits.Store(0)
	cmd := exec.Command("bash", filepath.Join(root, "examples", "retries", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), "RETRY_BASE="+base, "RETRY_ADMIN=http://"+s.admin)
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, raw)
	}
	out := string(raw)
	for _, want := range []string{
		"200 200 200 200 200 200", // /shop: the crashed endpoint's picks retried
		"503 after",               // the listed status, after the last try
		`coxswain_proxy_retries_total{reason="body_too_large",route="HTTPRoute/default/retries"} 2`,
		`coxswain_proxy_retries_total{reason="status",route="HTTPRoute/default/retries"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("try.sh --run output lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "/no-retry/cart") && i+1 < len(lines) {
			if n := strings.Count(lines[i+1], "502"); n != 3 {
				t.Errorf("/no-retry answered %q, want three 502s of six (every other pick is the crashed endpoint)", lines[i+1])
			}
		}
	}
	if !strings.Contains(out, `reason="connect",route="HTTPRoute/default/retries"} `) ||
		strings.Contains(out, `reason="connect",route="HTTPRoute/default/retries"} 0`) {
		t.Errorf("no connect retries counted:\n%s", out)
	}
	// The 503 of /shop/status/503 reached shop-a twice (the third try went to the crashed
	// endpoint first or in between); 6 + 6/2 + 2 + 4/2 requests in all.
	if n := hits.Load(); n != 6+3+2+2 {
		t.Errorf("shop-a saw %d requests, want 13", n)
	}
}
