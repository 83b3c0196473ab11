package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCustomFilterServe: examples/custom-filter, a third-party ExtensionRef filter in its own Go
// module and API group, is built into a distribution by the builder (exactly as its README says)
// and serves examples/custom-filter/manifests under `serve -f`: the backend receives the HMAC of
// the request. The example makes no edit outside its directory.
func TestCustomFilterServe(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "coxswain-hmac")
	build := exec.Command("go", "run", "./cmd/coxswain-build", "--offline",
		"--with", "example.com/hmacsign=./examples/custom-filter", "--output", bin)
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("coxswain-build: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "filter.ext.hmacsign.example.com.HMACSignature") {
		t.Fatalf("the builder's list-modules does not show the example's module:\n%s", out)
	}
	port := freePort(t)
	startServeWith(t, bin, exampleFiles(t, "custom-filter/manifests", map[string]int{
		"port: 8080": port, "port: 9010": startBackend(t, "echo").port,
	}))
	mac := hmac.New(sha256.New, []byte("demo-key-do-not-use"))
	mac.Write([]byte("GET\n/orders/9?full=1"))
	want := hex.EncodeToString(mac.Sum(nil))
	eventually(t, 10*time.Second, "the backend sees the HMAC signature", func() error {
		res, err := do(context.Background(), noRedirect, request{url: fmt.Sprintf("http://127.0.0.1:%d/orders/9?full=1", port)})
		if err != nil {
			return err
		}
		if res.code != 200 || res.echo == nil {
			return fmt.Errorf("got %d %s", res.code, res.body)
		}
		if got := res.echo.Headers["X-Signature"]; len(got) != 1 || got[0] != want {
			return fmt.Errorf("x-signature %v, want %s", got, want)
		}
		if got := res.echo.Headers["X-Signature-Key-Id"]; len(got) != 1 || got[0] != "demo-1" {
			return fmt.Errorf("x-signature-key-id %v, want demo-1", got)
		}
		return nil
	})
}
