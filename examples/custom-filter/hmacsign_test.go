package hmacsign_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"

	"example.com/hmacsign"
)

// spec is an HMACSignature's .spec as the controller copies it into the module config.
func spec(json string) []*irv1.ModuleConfig {
	mc := core.MustConfig(hmacsign.ModuleID, nil)
	mc.Json = []byte(json)
	return []*irv1.ModuleConfig{mc}
}

// TestSignature pins the canonical string and the encoding to an independent computation, so
// a backend written from the package documentation verifies what the filter sends.
func TestSignature(t *testing.T) {
	mac := hmac.New(sha256.New, []byte("k3y"))
	mac.Write([]byte("POST\n/a%2Fb?x=1&y=2"))
	want := hex.EncodeToString(mac.Sum(nil))
	if got := hmacsign.Signature("k3y", http.MethodPost, "/a%2Fb?x=1&y=2"); got != want {
		t.Errorf("Signature = %s, want %s", got, want)
	}
	if got := hmacsign.CanonicalString("GET", "/p?q"); got != "GET\n/p?q" {
		t.Errorf("CanonicalString = %q", got)
	}
}

// TestThroughProxy: real requests through the engine; the backend checks the signature against
// the request target it received itself.
func TestThroughProxy(t *testing.T) {
	h := filtertest.Start(t, spec(`{"header":"x-sig","key":"s3cret","keyID":"2026-12"}`), filtertest.Options{})
	for _, tc := range []struct{ method, target string }{
		{http.MethodGet, "/"},
		{http.MethodGet, "/orders/42?expand=items&x=%2F"},
		{http.MethodPut, "/a%2Fb/c"},
	} {
		req, err := h.NewRequest(tc.method, tc.target, strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Sig", "forged")
		req.Header.Set("X-Sig-Key-Id", "forged")
		ex := h.Do(t, req)
		up := ex.Upstream
		if ex.Status != http.StatusOK || up == nil {
			t.Fatalf("%s %s: status %d, upstream %v", tc.method, tc.target, ex.Status, up)
		}
		if up.RequestURI != tc.target {
			t.Errorf("backend saw %q, want %q unchanged", up.RequestURI, tc.target)
		}
		want := hmacsign.Signature("s3cret", tc.method, up.RequestURI)
		if got := up.Header.Values("X-Sig"); len(got) != 1 || got[0] != want {
			t.Errorf("%s %s: X-Sig = %q, want [%s]", tc.method, tc.target, got, want)
		}
		if got := up.Header.Values("X-Sig-Key-Id"); len(got) != 1 || got[0] != "2026-12" {
			t.Errorf("%s %s: X-Sig-Key-Id = %q, want [2026-12]", tc.method, tc.target, got)
		}
	}
}

// TestDefaults: an object read from a file has no API-server defaults; the module applies the
// header default itself, and without a keyID a client's key ID header does not pass.
func TestDefaults(t *testing.T) {
	h := filtertest.Start(t, spec(`{"key":"k"}`), filtertest.Options{})
	req, _ := h.NewRequest(http.MethodGet, "/x?y=1", nil)
	req.Header.Set("X-Signature-Key-Id", "forged")
	ex := h.Do(t, req)
	if ex.Upstream == nil {
		t.Fatalf("status %d, no upstream request", ex.Status)
	}
	if got, want := ex.Upstream.Header.Get(hmacsign.DefaultHeader), hmacsign.Signature("k", "GET", "/x?y=1"); got != want {
		t.Errorf("%s = %q, want %q", hmacsign.DefaultHeader, got, want)
	}
	if got := ex.Upstream.Header.Values("X-Signature-Key-Id"); got != nil {
		t.Errorf("X-Signature-Key-Id reached the backend: %q", got)
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, tc := range []struct{ name, json, want string }{
		{"no key", `{"header":"x-s"}`, "key is empty"},
		{"bad header name", `{"key":"k","header":"x s"}`, "not a valid header name"},
		{"key ID with a newline", `{"key":"k","keyID":"a\nb"}`, "not a valid header value"},
		{"unknown field", `{"key":"k","algorithm":"sha1"}`, "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := filtertest.Apply(t, spec(tc.json), filtertest.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDeclaresItsResource(t *testing.T) {
	exts, errs := core.NewRegistry((*hmacsign.Signer)(nil)).Extensions()
	if len(errs) != 0 || exts[hmacsign.ModuleID] != hmacsign.API {
		t.Errorf("Extensions() = %v, %v", exts, errs)
	}
}

func BenchmarkFilterRequest(b *testing.B) {
	bc := core.NewBuildContext(b.Context(), nil, core.NewRegistry((*hmacsign.Signer)(nil)), nil)
	b.Cleanup(func() { _ = bc.Close() })
	f, err := core.Load[core.HTTPRequestFilter](bc, spec(`{"key":"k","keyID":"1"}`)[0])
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/orders/42?expand=items", nil)
	b.ReportAllocs()
	for b.Loop() {
		f.FilterRequest(nil, r)
	}
}
