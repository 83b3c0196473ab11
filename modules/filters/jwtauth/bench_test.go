package jwtauth

import (
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
)

// benchES256 runs FilterRequest on one ES256 token; uncached clears the token's cache slot
// before every request, so each one verifies the signature.
func benchES256(b *testing.B, uncached bool) {
	k := jwttest.NewEC("k")
	f := load(b, Config{Settings: Settings{Issuer: issuer, Audiences: []string{"api"},
		ClaimToHeaders: []ClaimToHeader{{Claim: "sub", Header: "x-user-id"}}},
		JWKS: inline(k)})
	tok := k.Sign(jwttest.Claims(issuer, "api", nil))
	sum := hashToken(tok)
	slot := &f.cache.slots[binary.LittleEndian.Uint64(sum[:8])&(cacheSlots-1)]
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	w := httptest.NewRecorder()
	auth := "Bearer " + tok
	b.ReportAllocs()
	for b.Loop() {
		if uncached {
			slot.Store(nil)
		}
		r.Header["Authorization"] = []string{auth}
		if !f.FilterRequest(w, r) {
			b.Fatal(w.Body.String())
		}
	}
}

func BenchmarkES256Cached(b *testing.B)   { benchES256(b, false) }
func BenchmarkES256Uncached(b *testing.B) { benchES256(b, true) }
