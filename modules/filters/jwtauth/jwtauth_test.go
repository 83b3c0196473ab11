package jwtauth

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
)

const issuer = "https://issuer.example"

// testKeys are generated once: RSA keys are slow to make under -race.
var testKeys = sync.OnceValue(func() map[string]*jwttest.Key {
	return map[string]*jwttest.Key{
		"rsa":   jwttest.NewRSA("rsa", jose.RS256),
		"ps":    jwttest.NewRSA("ps", jose.PS384),
		"ec":    jwttest.NewEC("ec"),
		"ed":    jwttest.NewEd25519("ed"),
		"other": jwttest.NewEC("other"), // another issuer's key, never in the JWKS
	}
})

func configured() []*jwttest.Key {
	k := testKeys()
	return []*jwttest.Key{k["rsa"], k["ps"], k["ec"], k["ed"]}
}

// load provisions the module from cfg as a proxy does (strict decode, Provision, Validate).
func load(t testing.TB, cfg Config) *JwtAuth {
	t.Helper()
	bc := core.NewBuildContext(t.Context(), nil, core.NewRegistry((*JwtAuth)(nil)), nil)
	t.Cleanup(func() { _ = bc.Close() })
	f, err := core.Load[core.HTTPRequestFilter](bc, core.MustConfig(ModuleID, cfg))
	if err != nil {
		t.Fatal(err)
	}
	return f.(*JwtAuth)
}

func inline(keys ...*jwttest.Key) JWKS {
	return JWKS{JWKSSource: JWKSSource{Inline: string(jwttest.JWKS(keys...))}}
}

func baseConfig() Config {
	return Config{Settings: Settings{Issuer: issuer, Audiences: []string{"api", "web"},
		ClaimToHeaders: []ClaimToHeader{{Claim: "sub", Header: "x-user-id"}, {Claim: "roles", Header: "x-roles"}, {Claim: "note", Header: "x-note"}}},
		JWKS: inline(configured()...)}
}

type answer struct {
	ok       bool
	code     int
	www      string
	upstream http.Header
	body     string
}

func send(f *JwtAuth, mod func(*http.Request)) answer {
	r := httptest.NewRequest(http.MethodGet, "http://app.example/x", nil)
	if mod != nil {
		mod(r)
	}
	w := httptest.NewRecorder()
	ok := f.FilterRequest(w, r)
	return answer{ok: ok, code: w.Code, www: w.Header().Get("WWW-Authenticate"), upstream: r.Header, body: w.Body.String()}
}

func bearer(tok string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}

// TestAcceptsEveryKeyType: tokens of RS256, PS384, ES256 and EdDSA keys verify; the token is
// removed and the claims are set as headers.
func TestAcceptsEveryKeyType(t *testing.T) {
	f := load(t, baseConfig())
	for _, k := range configured() {
		t.Run(string(k.Alg), func(t *testing.T) {
			tok := k.Sign(jwttest.Claims(issuer, "api", map[string]any{"roles": []string{"a", "b"}}))
			a := send(f, bearer(tok))
			if !a.ok {
				t.Fatalf("rejected: %d %q", a.code, a.body)
			}
			if a.upstream.Get("Authorization") != "" {
				t.Error("the token went upstream")
			}
			if a.upstream.Get("X-User-Id") != "user-1" || a.upstream.Get("X-Roles") != `["a","b"]` {
				t.Errorf("claim headers %v", a.upstream)
			}
			// A key without a kid in the token: tried by algorithm.
			if a := send(f, bearer(k.SignOpts(jwttest.Claims(issuer, "web", nil), false))); !a.ok {
				t.Errorf("without kid: %d %q", a.code, a.body)
			}
		})
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestRejects: every way a token can be wrong is a 401 with the invalid_token challenge, and
// nothing goes upstream; a request without a token gets the bare challenge.
func TestRejects(t *testing.T) {
	f := load(t, baseConfig())
	keys := testKeys()
	good := jwttest.Claims(issuer, "api", nil)
	with := func(k, v string) map[string]any { return jwttest.Claims(issuer, "api", map[string]any{k: v}) }
	claimsJSON, _ := json.Marshal(good)
	pubDER, _ := x509.MarshalPKIXPublicKey(keys["rsa"].Private.Public())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hmacWith := func(secret []byte) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: secret},
			(&jose.SignerOptions{}).WithHeader("kid", "rsa"))
		if err != nil {
			t.Fatal(err)
		}
		obj, _ := s.Sign(claimsJSON)
		out, _ := obj.CompactSerialize()
		return out
	}
	ecTok := keys["ec"].Sign(good)
	parts := strings.Split(ecTok, ".")
	now := time.Now()

	for _, tc := range []struct {
		name, token, want string
	}{
		{"alg none", b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(string(claimsJSON)) + ".", "algorithm not accepted"},
		{"alg none with kid", b64(`{"alg":"none","kid":"ec"}`) + "." + b64(string(claimsJSON)) + ".", "algorithm not accepted"},
		{"HS256 with the RSA public key (PEM) as secret", hmacWith(pubPEM), "algorithm not accepted"},
		{"HS256 with the RSA public key (DER) as secret", hmacWith(pubDER), "algorithm not accepted"},
		{"expired", keys["ec"].Sign(jwttest.Claims(issuer, "api", map[string]any{"exp": now.Add(-time.Hour).Unix()})), "expired"},
		{"expired beyond the leeway", keys["ec"].Sign(jwttest.Claims(issuer, "api", map[string]any{"exp": now.Add(-Leeway - time.Second).Unix()})), "expired"},
		{"nbf in the future", keys["ec"].Sign(jwttest.Claims(issuer, "api", map[string]any{"nbf": now.Add(time.Hour).Unix()})), "not valid yet"},
		{"wrong issuer", keys["ec"].Sign(with("iss", "https://evil.example")), "wrong issuer"},
		{"issuer prefix", keys["ec"].Sign(with("iss", issuer+"/x")), "wrong issuer"},
		{"no issuer", keys["ec"].Sign(map[string]any{"aud": "api", "exp": now.Add(time.Hour).Unix()}), "wrong issuer"},
		{"wrong audience", keys["ec"].Sign(jwttest.Claims(issuer, "other", nil)), "wrong audience"},
		{"no audience", keys["ec"].Sign(map[string]any{"iss": issuer}), "wrong audience"},
		{"another issuer's key, unknown kid", keys["other"].Sign(good), "unknown kid"},
		{"another issuer's key, a kid that exists", (&jwttest.Key{KID: "ec", Alg: jose.ES256, Private: keys["other"].Private}).Sign(good), "signature"},
		{"another issuer's key, no kid", keys["other"].SignOpts(good, false), "signature"},
		{"RSA alg against the EC key's kid", (&jwttest.Key{KID: "ec", Alg: jose.RS256, Private: keys["rsa"].Private}).Sign(good), "signature"},
		{"PS384 against the RS256 key's kid", (&jwttest.Key{KID: "rsa", Alg: jose.PS384, Private: keys["rsa"].Private}).Sign(good), "signature"},
		{"tampered payload", parts[0] + "." + b64(strings.Replace(string(claimsJSON), "user-1", "admin", 1)) + "." + parts[2], "signature"},
		{"signature cut", parts[0] + "." + parts[1] + ".", "signature"},
		{"garbage", "not.a.token", "malformed"},
		{"huge", strings.Repeat("A", 100<<10), "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(f, bearer(tc.token))
			if a.ok || a.code != http.StatusUnauthorized || a.www != `Bearer error="invalid_token"` || !strings.Contains(a.body, tc.want) {
				t.Errorf("got ok=%v %d %q %q, want 401 invalid_token mentioning %q", a.ok, a.code, a.www, a.body, tc.want)
			}
		})
	}

	valid := keys["ec"].Sign(good)
	for _, tc := range []struct {
		name string
		mod  func(*http.Request)
	}{
		{"no header", nil},
		{"basic credentials", func(r *http.Request) { r.SetBasicAuth("u", "p") }},
		{"token in the query", func(r *http.Request) { r.URL.RawQuery = "access_token=" + valid }},
		{"token in a cookie", func(r *http.Request) { r.Header.Set("Cookie", "access_token="+valid) }},
		{"empty bearer", bearer("")},
		{"Authorization twice", func(r *http.Request) {
			r.Header.Add("Authorization", "Bearer "+valid)
			r.Header.Add("Authorization", "Bearer "+valid)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(f, tc.mod)
			if a.ok || a.code != http.StatusUnauthorized || a.www != "Bearer" {
				t.Errorf("got ok=%v %d %q %q, want 401 with the bare challenge", a.ok, a.code, a.www, a.body)
			}
		})
	}
	if a := send(f, func(r *http.Request) { r.Header.Set("Authorization", "bearer "+valid) }); !a.ok {
		t.Errorf("a lower-case scheme: %d %q", a.code, a.body)
	}
}

// TestClaimHeaders: claim headers are removed from every request (a client cannot forge them,
// not even when the token lacks the claim), set from the token otherwise, with control
// characters made spaces and non-strings JSON-encoded; the payload header carries the payload.
func TestClaimHeaders(t *testing.T) {
	cfg := baseConfig()
	cfg.ForwardPayloadHeader = "x-jwt-payload"
	f := load(t, cfg)
	k := testKeys()["ec"]
	forge := func(tok string) func(*http.Request) {
		return func(r *http.Request) {
			bearer(tok)(r)
			r.Header.Set("X-User-Id", "admin")
			r.Header.Add("X-Roles", "root")
			r.Header.Set("X-Jwt-Payload", "forged")
		}
	}
	noSub := jwttest.Claims(issuer, "api", nil)
	delete(noSub, "sub")
	tok := k.Sign(noSub)
	a := send(f, forge(tok))
	if !a.ok || a.upstream["X-User-Id"] != nil || a.upstream["X-Roles"] != nil {
		t.Errorf("forged headers reached the upstream: %v", a.upstream)
	}
	if got, want := a.upstream.Get("X-Jwt-Payload"), strings.Split(tok, ".")[1]; got != want {
		t.Errorf("payload header %q, want %q", got, want)
	}
	// Rejected requests: stripped too (nothing goes upstream anyway).
	if a := send(f, forge("bad")); a.ok || a.upstream["X-User-Id"] != nil {
		t.Errorf("rejected request kept the forged header: %v", a.upstream)
	}

	tok = k.Sign(jwttest.Claims(issuer, "api", map[string]any{
		"sub": "eve\r\nX-Admin: true\x00", "roles": map[string]any{"admin": true}, "note": 42.5}))
	a = send(f, bearer(tok))
	if !a.ok {
		t.Fatalf("rejected: %q", a.body)
	}
	if got := a.upstream.Get("X-User-Id"); got != "eve  X-Admin: true" {
		t.Errorf("X-User-Id %q, want the CR/LF/NUL made spaces", got)
	}
	if a.upstream.Get("X-Admin") != "" || a.upstream.Get("X-Roles") != `{"admin":true}` || a.upstream.Get("X-Note") != "42.5" {
		t.Errorf("headers %v", a.upstream)
	}

	cfg = baseConfig()
	cfg.Forward = true
	if a := send(load(t, cfg), bearer(tok)); !a.ok || a.upstream.Get("Authorization") != "Bearer "+tok {
		t.Errorf("forward: upstream Authorization %q", a.upstream.Get("Authorization"))
	}
}

// TestFromHeaders: the token is read from the configured headers only, in order.
func TestFromHeaders(t *testing.T) {
	cfg := baseConfig()
	cfg.FromHeaders = []TokenSource{{Name: "x-token"}, {Name: "authorization", ValuePrefix: "JWT "}}
	f := load(t, cfg)
	tok := testKeys()["ed"].Sign(jwttest.Claims(issuer, "api", nil))
	if a := send(f, func(r *http.Request) { r.Header.Set("X-Token", tok) }); !a.ok || a.upstream.Get("X-Token") != "" {
		t.Errorf("x-token: %d %q, upstream %v", a.code, a.body, a.upstream)
	}
	if a := send(f, func(r *http.Request) { r.Header.Set("Authorization", "JWT "+tok) }); !a.ok {
		t.Errorf("JWT prefix: %d %q", a.code, a.body)
	}
	if a := send(f, bearer(tok)); a.ok || a.www != "Bearer" {
		t.Errorf("Bearer is not a configured source: ok=%v %q", a.ok, a.www)
	}
}

// TestUnresolved: keys the controller has not fetched (or a build without the resolver) answer
// 503, and UNAVAILABLE to gRPC; a bad token to gRPC is UNAUTHENTICATED.
func TestUnresolved(t *testing.T) {
	cfg := baseConfig()
	cfg.JWKS = JWKS{Unresolved: "https://idp.example/jwks: not fetched yet"}
	f := load(t, cfg)
	if a := send(f, bearer("x")); a.ok || a.code != http.StatusServiceUnavailable {
		t.Errorf("unresolved: %d %q", a.code, a.body)
	}
	grpc := func(r *http.Request) { r.Header.Set("Content-Type", "application/grpc") }
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/svc/M", nil)
	grpc(r)
	if f.FilterRequest(w, r) || w.Header().Get("Grpc-Status") != "14" {
		t.Errorf("gRPC unresolved: %d %v", w.Code, w.Header())
	}
	cfg.JWKS = JWKS{JWKSSource: JWKSSource{Remote: &RemoteJWKS{URI: "https://idp.example/jwks"}}}
	if a := send(load(t, cfg), nil); a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "unavailable") {
		t.Errorf("remote without a resolver: %d %q", a.code, a.body)
	}
	w = httptest.NewRecorder()
	grpc(r)
	if load(t, baseConfig()).FilterRequest(w, r) || w.Header().Get("Grpc-Status") != "16" || w.Header().Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("gRPC without a token: %d %v", w.Code, w.Header())
	}
}

// TestCheckConfig: what the controller reports before a proxy sees it.
func TestCheckConfig(t *testing.T) {
	k := testKeys()
	rsaNoAlg := k["rsa"].JWK()
	rsaNoAlg.Algorithm = ""
	jwks := func(keys ...jose.JSONWebKey) JWKS {
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: keys})
		return JWKS{JWKSSource: JWKSSource{Inline: string(b)}}
	}
	hmac := jose.JSONWebKey{Key: []byte(strings.Repeat("k", 32)), KeyID: "h", Algorithm: "HS256"}
	for name, mod := range map[string]func(*Config){
		"no issuer":         func(c *Config) { c.Issuer = "" },
		"no keys":           func(c *Config) { c.JWKS = JWKS{} },
		"both":              func(c *Config) { c.JWKS.Remote = &RemoteJWKS{URI: "https://x"} },
		"not JSON":          func(c *Config) { c.JWKS.Inline = "{" },
		"only an HMAC key":  func(c *Config) { c.JWKS = jwks(hmac) },
		"RSA without alg":   func(c *Config) { c.JWKS = jwks(rsaNoAlg) },
		"EC key with RS256": func(c *Config) { j := k["ec"].JWK(); j.Algorithm = "RS256"; c.JWKS = jwks(j) },
		"token header as claim header": func(c *Config) {
			c.ClaimToHeaders = []ClaimToHeader{{Claim: "sub", Header: "authorization"}}
		},
		"Host from a claim": func(c *Config) { c.ClaimToHeaders = []ClaimToHeader{{Claim: "sub", Header: "host"}} },
		"header twice":      func(c *Config) { c.ForwardPayloadHeader = "X-User-Id" },
		"bad header name":   func(c *Config) { c.ForwardPayloadHeader = "x y" },
		"bad source name":   func(c *Config) { c.FromHeaders = []TokenSource{{Name: "a:b"}} },
		"empty claim":       func(c *Config) { c.ClaimToHeaders = []ClaimToHeader{{Header: "x-a"}} },
	} {
		cfg := baseConfig()
		mod(&cfg)
		f := &JwtAuth{Config: cfg}
		if err := f.CheckConfig(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg := baseConfig()
	cfg.JWKS = jwks(rsaNoAlg, hmac, k["ec"].JWK())
	f := &JwtAuth{Config: cfg}
	if err := f.CheckConfig(); err != nil {
		t.Fatal(err)
	}
	if w := f.ConfigWarnings(); len(w) != 2 || !strings.Contains(w[0], "cannot be inferred") || !strings.Contains(w[1], "symmetric") {
		t.Errorf("warnings %q", w)
	}
}

// TestCache: a verified token is served from the cache, but never past its exp.
func TestCache(t *testing.T) {
	f := load(t, baseConfig())
	now := time.Now()
	f.now = func() time.Time { return now }
	tok := testKeys()["ec"].Sign(jwttest.Claims(issuer, "api", map[string]any{"exp": now.Add(time.Minute).Unix()}))
	if a := send(f, bearer(tok)); !a.ok {
		t.Fatal(a.body)
	}
	keys := f.keys
	f.keys = nil // a cache hit does not verify the signature again
	if a := send(f, bearer(tok)); !a.ok {
		t.Fatalf("not served from the cache: %q", a.body)
	}
	now = now.Add(time.Minute + time.Second)
	if a := send(f, bearer(tok)); a.ok {
		t.Fatal("cached past exp")
	}
	f.keys = keys
	if a := send(f, bearer(tok)); !a.ok {
		t.Fatalf("within the leeway: %q", a.body)
	}
	now = now.Add(Leeway)
	if a := send(f, bearer(tok)); a.ok || !strings.Contains(a.body, "expired") {
		t.Fatalf("after exp: %q", a.body)
	}
}
