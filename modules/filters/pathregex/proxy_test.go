package pathregex_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
	"github.com/coxswain-labs/coxswain/modules/filters/pathregex"
)

// spec is a PathRewriteRegex object's .spec as the controller copies it into the module config.
func spec(json string) []*irv1.ModuleConfig {
	mc := core.MustConfig(pathregex.ModuleID, nil)
	mc.Json = []byte(json)
	return []*irv1.ModuleConfig{mc}
}

// TestThroughProxy sends real requests through the engine and checks the target the backend
// received on the wire.
func TestThroughProxy(t *testing.T) {
	h := filtertest.Start(t, spec(`{"pattern":"^/api/v(?P<ver>\\d+)/(.*)$","substitution":"/${ver}/svc/$2"}`),
		filtertest.Options{Modules: []core.Module{(*pathregex.PathRewriteRegex)(nil)}})
	tests := []struct{ target, want string }{
		{"/api/v1/users?limit=5", "/1/svc/users?limit=5"},
		{"/api/v22/a%2Fb", "/22/svc/a%2Fb"},
		{"/other/v1/x?q=%2F", "/other/v1/x?q=%2F"},
	}
	for _, tt := range tests {
		ex := h.Get(t, tt.target)
		if ex.Status != http.StatusOK || ex.Upstream == nil {
			t.Fatalf("%s: status %d, upstream %v", tt.target, ex.Status, ex.Upstream)
		}
		if ex.Upstream.RequestURI != tt.want {
			t.Errorf("%s: backend saw %q, want %q", tt.target, ex.Upstream.RequestURI, tt.want)
		}
	}
}

// TestInvalidPatternRejected: the engine refuses a snapshot with a pattern that does not compile,
// and says why.
func TestInvalidPatternRejected(t *testing.T) {
	_, err := filtertest.Apply(t, spec(`{"pattern":"^/(a"}`), filtertest.Options{})
	if err == nil || !strings.Contains(err.Error(), "missing closing )") {
		t.Fatalf("Apply error = %v, want the pattern's compile error", err)
	}
}
