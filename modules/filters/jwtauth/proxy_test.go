package jwtauth_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
)

// TestThroughProxy: real requests through the engine. A valid token reaches the backend as
// claim headers, without the token and without what the client forged; an invalid one, a
// missing one and an oversized header never reach it.
func TestThroughProxy(t *testing.T) {
	k := jwttest.NewEC("k1")
	cfg := jwtauth.Config{
		Settings: jwtauth.Settings{Issuer: "https://idp.example", Audiences: []string{"app"},
			ClaimToHeaders: []jwtauth.ClaimToHeader{{Claim: "sub", Header: "X-User-Id"}}},
		JWKS: jwtauth.JWKS{JWKSSource: jwtauth.JWKSSource{Inline: string(jwttest.JWKS(k))}},
	}
	h := filtertest.Start(t, []*irv1.ModuleConfig{core.MustConfig(jwtauth.ModuleID, cfg)},
		filtertest.Options{Modules: []core.Module{(*jwtauth.JwtAuth)(nil)}})
	get := func(hdr map[string]string) filtertest.Exchange {
		req, err := h.NewRequest(http.MethodGet, "/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return h.Do(t, req)
	}
	tok := k.Sign(jwttest.Claims("https://idp.example", "app", nil))
	ex := get(map[string]string{"Authorization": "Bearer " + tok, "X-User-Id": "admin"})
	if ex.Status != 200 || ex.Upstream == nil {
		t.Fatalf("valid token: %d %q", ex.Status, ex.Body)
	}
	if ex.Upstream.Header.Get("X-User-Id") != "user-1" || ex.Upstream.Header.Get("Authorization") != "" {
		t.Errorf("upstream headers %v", ex.Upstream.Header)
	}
	for name, hdr := range map[string]map[string]string{
		"none":    nil,
		"invalid": {"Authorization": "Bearer " + tok[:len(tok)-4] + "AAAA"},
		"other":   {"Authorization": "Bearer " + jwttest.NewEC("k1").Sign(jwttest.Claims("https://idp.example", "app", nil))},
		// Over MaxTokenBytes, under the proxy's 64 KiB header limit: the filter's refusal.
		"oversize": {"Authorization": "Bearer " + strings.Repeat("a", 40<<10)},
	} {
		ex := get(hdr)
		if ex.Upstream != nil || ex.Status == 200 || ex.Status >= 500 {
			t.Errorf("%s: %d %q, upstream %v", name, ex.Status, ex.Body, ex.Upstream)
		}
		if ex.Status != 401 || !strings.HasPrefix(ex.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: %d %v, want 401 with a Bearer challenge", name, ex.Status, ex.Header)
		}
	}
}
