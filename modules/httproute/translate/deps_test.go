package translate

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoProxyEngineImport keeps the controller half away from the proxy engine: the translator
// emits IR and never runs it.
func TestNoProxyEngineImport(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "../../../controller/translator").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/coxswain-labs/coxswain/core/proxy") {
			t.Errorf("imports %s", pkg)
		}
	}
}
