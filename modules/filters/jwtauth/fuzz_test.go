package jwtauth

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth/jwttest"
)

// eddsa signs header.payload (both raw JSON) with k, by hand, so that the fuzzer controls every
// byte of the header and the claims. Ed25519 signatures are deterministic, so the same input
// always takes the same path (an ECDSA signature would not: random coverage confuses the fuzzer).
func eddsa(k ed25519.PrivateKey, header, payload []byte) string {
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	return input + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(k, []byte(input)))
}

// FuzzJWT feeds arbitrary headers and claims, signed by the configured key, by another key that
// claims the configured kid, with a forged signature, or as a whole token. It never panics, never
// accepts a token the configured key did not sign, and never sets a header value with a control
// character.
func FuzzJWT(f *testing.F) {
	good := jwttest.NewEd25519("good")
	evil := &jwttest.Key{KID: "good", Alg: good.Alg, Private: jwttest.NewEd25519("evil").Private}
	m := &JwtAuth{Config: Config{Settings: Settings{Issuer: "iss", Audiences: []string{"aud"},
		ClaimToHeaders:       []ClaimToHeader{{Claim: "sub", Header: "x-sub"}, {Claim: "r", Header: "x-r"}},
		ForwardPayloadHeader: "x-payload"},
		JWKS: JWKS{JWKSSource: JWKSSource{Inline: string(jwttest.JWKS(good))}}}}
	if err := m.compile(); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"alg":"EdDSA","kid":"good"}`), []byte(`{"iss":"iss","aud":"aud","sub":"a\r\nb","r":[1,{"x":"\u0000"}]}`), byte(0), "")
	f.Add([]byte(`{"alg":"EdDSA"}`), []byte(`{"iss":"iss","aud":["x","aud"],"exp":1e300,"nbf":-1e300}`), byte(0), "")
	f.Add([]byte(`{"alg":"none"}`), []byte(`{"iss":"iss","aud":"aud"}`), byte(2), "")
	f.Add([]byte(`{"alg":"HS256","kid":"good"}`), []byte(`{"iss":"iss","aud":"aud"}`), byte(2), "c2ln")
	f.Add([]byte(`{"alg":"EdDSA","kid":"good","crit":["exp"],"exp":1}`), []byte(`{"iss":"iss","aud":"aud"}`), byte(0), "")
	f.Add([]byte(`{"alg":"EdDSA","kid":"good","b64":false,"crit":["b64"]}`), []byte(`{"iss":"iss","aud":"aud"}`), byte(0), "")
	f.Add([]byte(`{"alg":"EdDSA","kid":"good"}`), []byte(`{"iss":"iss","aud":"aud"}`), byte(1), "")
	f.Add([]byte(nil), []byte(nil), byte(3), "eyJhbGciOiJFZERTQSJ9.e30.")
	f.Fuzz(func(t *testing.T, header, payload []byte, mode byte, raw string) {
		var tok string
		switch mode % 4 {
		case 0:
			tok = eddsa(good.Private.(ed25519.PrivateKey), header, payload)
		case 1:
			tok = eddsa(evil.Private.(ed25519.PrivateKey), header, payload)
		case 2:
			tok = base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + raw
		default:
			tok = raw
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header["Authorization"] = []string{"Bearer " + tok}
		r.Header["X-Sub"] = []string{"forged"}
		w := httptest.NewRecorder()
		ok := m.FilterRequest(w, r)
		if !ok {
			if w.Code != http.StatusUnauthorized || r.Header.Get("X-Sub") != "" {
				t.Fatalf("rejected with %d, X-Sub %q", w.Code, r.Header.Get("X-Sub"))
			}
			return
		}
		if mode%4 != 0 {
			t.Fatalf("accepted a token the configured key did not sign (mode %d): %q", mode%4, tok)
		}
		for name, vals := range r.Header {
			for _, v := range vals {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("header %s = %q", name, v)
				}
			}
		}
		if r.Header.Get("X-Sub") == "forged" || r.Header.Get("Authorization") != "" {
			t.Fatalf("upstream headers %v", r.Header)
		}
	})
}
