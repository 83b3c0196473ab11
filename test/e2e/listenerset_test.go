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

// TestExamplesListenerSetTry runs examples/listenerset/try.sh --run against `coxswain serve -f
// examples/listenerset`: the ListenerSet's listener serves its team's backend, the Gateway keeps
// the hostname the ListenerSet asked for too, a ListenerSet of a namespace the Gateway does not
// admit serves nothing, and validate says why.
func TestExamplesListenerSetTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	port := freePort(t)
	var shopHits atomic.Int64
	ports := map[string]int{
		"port: 8098": port,
		"port: 9371": startEchoLike(t, "www", new(atomic.Int64)),
		"port: 9372": startEchoLike(t, "shop", &shopHits),
	}
	startServe(t, exampleFiles(t, "listenerset", ports))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "examples/listenerset served", func() error {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Host: shop.example.com", base+"/").Output()
		if err != nil || string(out) != "200" {
			return fmt.Errorf("GET shop.example.com: %s %v", out, err)
		}
		return nil
	})
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "examples", "listenerset", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), "LISTENERSET_BASE="+base, "COXSWAIN="+binary)
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, raw)
	}
	out := string(raw)
	for _, want := range []string{
		"shop.example.com -> shop",
		"www.example.com -> www", // the Gateway's own listener wins the hostname
		"blog.example.com -> 404",
		"ListenerSet shop/shop listener www: Accepted=False (HostnameConflict)",
		"ListenerSet blog/blog: Accepted=False (NotAllowed)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("try.sh --run output lacks %q:\n%s", want, out)
		}
	}
	if shopHits.Load() == 0 {
		t.Error("the shop backend saw no request")
	}
}
