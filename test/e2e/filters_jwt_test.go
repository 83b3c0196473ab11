package e2e

import (
	"context"
	"crypto"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
)

// demoKey is the example's committed demo key (examples/filters/jwtmint/demo-key.jwk).
func demoKey(t *testing.T) *jwttest.Key {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "filters", "jwtmint", "demo-key.jwk"))
	if err != nil {
		t.Fatal(err)
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	return &jwttest.Key{KID: jwk.KeyID, Alg: jose.SignatureAlgorithm(jwk.Algorithm), Private: jwk.Key.(crypto.Signer)}
}

// TestExamplesFiltersJwt serves examples/filters and makes the requests its jwtauth.yaml shows:
// a token from the demo key reaches the backend as x-user-id, without the token; no token, a
// token of another key, and a forged x-user-id without a token are 401.
func TestExamplesFiltersJwt(t *testing.T) {
	port := freePort(t)
	s := startServe(t, exampleFiles(t, "filters", map[string]int{"port: 8090": port, "port: 9331": startBackend(t, "app").port}))
	url := fmt.Sprintf("http://127.0.0.1:%d/jwt/hello", port)
	get := func(h map[string]string) *result {
		t.Helper()
		res, err := do(context.Background(), noRedirect, request{url: url, headers: h})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	claims := jwttest.Claims("https://demo.coxswain.invalid", "filters-example", map[string]any{"sub": "alice"})
	tok := demoKey(t).Sign(claims)
	eventually(t, 10*time.Second, "/jwt with the demo token", func() error {
		res := get(map[string]string{"Authorization": "Bearer " + tok, "X-User-Id": "mallory"})
		if res.code != 200 || res.echo == nil {
			return fmt.Errorf("got %d %s", res.code, res.body)
		}
		if got := res.echo.Headers["X-User-Id"]; len(got) != 1 || got[0] != "alice" || res.echo.Headers["Authorization"] != nil {
			return fmt.Errorf("backend headers %v", res.echo.Headers)
		}
		return nil
	})
	for name, h := range map[string]map[string]string{
		"no token":     nil,
		"forged user":  {"X-User-Id": "alice"},
		"another key":  {"Authorization": "Bearer " + jwttest.NewEC("demo").Sign(claims)},
		"wrong issuer": {"Authorization": "Bearer " + demoKey(t).Sign(jwttest.Claims("https://evil.invalid", "filters-example", nil))},
	} {
		if res := get(h); res.code != 401 || !strings.HasPrefix(res.header.Get("WWW-Authenticate"), "Bearer") || res.echo != nil {
			t.Errorf("%s: %d %q %v", name, res.code, res.body, res.header)
		}
	}
	for _, p := range s.status().Report.Problems {
		if p.Object == "HTTPRoute default/jwt" {
			t.Errorf("problem %+v", p)
		}
	}
}

// TestJwtRemoteRotation: a JwtAuth with jwks.remote, fetched by `coxswain serve` from a loopback
// JWKS server. While the server fails, the rule answers 503 and /status says JWKSUnavailable;
// once it answers, tokens of its key pass; after the server rotates to a new key, the new key's
// tokens pass and the old key's do not — with no restart and no file change.
func TestJwtRemoteRotation(t *testing.T) {
	k1, k2 := jwttest.NewEC("k1"), jwttest.NewEd25519("k2")
	jwks := jwttest.NewServer(false, k1)
	t.Cleanup(jwks.Close)
	jwks.Fail(http.StatusInternalServerError)
	port := freePort(t)
	b := startBackend(t, "app")
	files := map[string]string{
		"gateway.yaml":  gatewayClassYAML + "---\n" + gatewayYAML(listener{name: "http", protocol: "HTTP", port: port}),
		"services.yaml": serviceYAML(b),
		"route.yaml": routeYAML("api", "", `  rules:
  - filters:
    - type: ExtensionRef
      extensionRef: {group: gateway.coxswain-labs.dev, kind: JwtAuth, name: remote}
    backendRefs: [{name: app, port: 80}]
`),
		"jwt.yaml": fmt.Sprintf(`apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: JwtAuth
metadata: {name: remote}
spec:
  issuer: https://idp.test
  jwks:
    remote: {uri: %q, refreshInterval: 1s}
`, jwks.JWKSURL()),
	}
	s := startServe(t, files)
	url := fmt.Sprintf("http://127.0.0.1:%d/x", port)
	code := func(tok string) (int, error) {
		res, err := do(context.Background(), noRedirect, request{url: url, headers: map[string]string{"Authorization": "Bearer " + tok}})
		if err != nil {
			return 0, err
		}
		return res.code, nil
	}
	awaitCode := func(what, tok string, want int) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() error {
			got, err := code(tok)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("got %d, want %d", got, want)
			}
			return nil
		})
	}
	tok1 := k1.Sign(jwttest.Claims("https://idp.test", "", nil))
	tok2 := k2.Sign(jwttest.Claims("https://idp.test", "", nil))

	awaitCode("503 while the JWKS server fails", tok1, 503)
	eventually(t, 10*time.Second, "/status JWKSUnavailable", func() error {
		for _, p := range s.status().Report.Problems {
			if p.Object == "HTTPRoute default/api" && p.Reason == "JWKSUnavailable" {
				return nil
			}
		}
		return fmt.Errorf("problems %+v", s.status().Report.Problems)
	})

	jwks.Rotate(k1)
	awaitCode("k1 accepted once the JWKS is served", tok1, 200)
	if got, err := code(tok2); err != nil || got != 401 {
		t.Errorf("k2 before the rotation: %d %v", got, err)
	}
	for _, p := range s.status().Report.Problems {
		t.Errorf("problem after the fetch: %+v", p)
	}

	jwks.Rotate(k2)
	awaitCode("k2 accepted after the rotation", tok2, 200)
	awaitCode("k1 refused after the rotation", tok1, 401)
}
