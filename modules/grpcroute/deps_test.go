package grpcroute_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestProxySideDeps keeps route.grpc loadable by a proxy-only build: no Kubernetes, no fx, and
// not the gRPC library either (the proxy speaks gRPC's wire format, it does not need the stack).
func TestProxySideDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "go.uber.org/fx", "google.golang.org/grpc"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("route.grpc depends on %s", pkg)
			}
		}
	}
}
