package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExamplesListenerFiltersTry runs examples/listener-filters/try.sh --run against `coxswain
// serve -f examples/listener-filters`: the listener's IpAccessControl and BasicAuth run before
// routing (401 on a path no route has, the 404 only with credentials, 403 from 127.0.0.3 even
// with them), in the listener's order.
func TestExamplesListenerFiltersTry(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	port := freePort(t)
	startServe(t, exampleFiles(t, "listener-filters", map[string]int{"port: 8096": port, "port: 9341": startBackend(t, "app").port}))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	eventually(t, 10*time.Second, "examples/listener-filters served", func() error {
		out, err := exec.Command("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-u", "admin:coxswain-demo", base+"/app/x").Output()
		if err != nil || string(out) != "200" {
			return fmt.Errorf("GET /app/x: %s %v", out, err)
		}
		return nil
	})
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "examples", "listener-filters", "try.sh"), "--run")
	cmd.Env = append(os.Environ(), "LF_BASE="+base)
	raw, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("try.sh --run: %v\n%s", err, raw)
	}
	var answers []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "$") {
			answers = append(answers, strings.TrimSpace(line))
		}
	}
	want := []string{"401 401", "200 404", "403"}
	if strings.Join(answers, "|") != strings.Join(want, "|") {
		t.Errorf("try.sh answered %q, want %q\n%s", answers, want, raw)
	}
}
