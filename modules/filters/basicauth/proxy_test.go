package basicauth_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/basicauth"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
)

// TestThroughProxy sends real requests through the engine: the backend sees only authenticated
// requests, without their credentials.
func TestThroughProxy(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := basicauth.Config{Realm: "default/admin", Users: []basicauth.User{{Name: "ali", Hash: string(h)}}}
	harness := filtertest.Start(t, []*irv1.ModuleConfig{core.MustConfig(basicauth.ModuleID, cfg)},
		filtertest.Options{Modules: []core.Module{(*basicauth.BasicAuth)(nil)}})
	send := func(auth string) filtertest.Exchange {
		req, err := harness.NewRequest(http.MethodGet, "/admin/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return harness.Do(t, req)
	}
	good := "Basic " + base64.StdEncoding.EncodeToString([]byte("ali:open sesame"))
	for range 2 { // the second from the cache
		ex := send(good)
		if ex.Status != http.StatusOK || ex.Upstream == nil {
			t.Fatalf("valid credentials: status %d, upstream %v", ex.Status, ex.Upstream)
		}
		if v, ok := ex.Upstream.Header["Authorization"]; ok {
			t.Errorf("the backend received Authorization %q", v)
		}
	}
	for _, auth := range []string{"", "Basic " + base64.StdEncoding.EncodeToString([]byte("ali:open says me")),
		"Basic " + strings.Repeat("A", 60<<10)} {
		ex := send(auth)
		if ex.Status != http.StatusUnauthorized || ex.Upstream != nil || ex.Header.Get("WWW-Authenticate") != `Basic realm="default/admin"` {
			t.Errorf("Authorization %.20q: status %d, challenge %q, upstream %v; want 401 with the challenge and nothing upstream",
				auth, ex.Status, ex.Header.Get("WWW-Authenticate"), ex.Upstream != nil)
		}
	}
}

// TestClosedThroughProxy: a closed config serves its rule with 503.
func TestClosedThroughProxy(t *testing.T) {
	cfg := basicauth.Config{Realm: "default/admin", Closed: "Secret default/htpasswd does not exist"}
	harness := filtertest.Start(t, []*irv1.ModuleConfig{core.MustConfig(basicauth.ModuleID, cfg)},
		filtertest.Options{Modules: []core.Module{(*basicauth.BasicAuth)(nil)}})
	if ex := harness.Get(t, "/x"); ex.Status != http.StatusServiceUnavailable || ex.Upstream != nil {
		t.Errorf("status %d upstream %v, want 503 and nothing upstream", ex.Status, ex.Upstream)
	}
}
