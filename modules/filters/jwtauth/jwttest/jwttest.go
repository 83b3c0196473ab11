// Package jwttest is for tests of JWT verification: real keys generated on the spot (RSA, ECDSA
// P-256, Ed25519), tokens signed with them, their JWKS, and a loopback JWKS server whose keys a
// test rotates. It is test support only; nothing in a binary imports it.
package jwttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is a signing key with its JWK identity.
type Key struct {
	KID     string
	Alg     jose.SignatureAlgorithm
	Private crypto.Signer
}

// NewRSA returns a 2048-bit RSA key for alg (RS256..PS512).
func NewRSA(kid string, alg jose.SignatureAlgorithm) *Key {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return &Key{KID: kid, Alg: alg, Private: k}
}

// NewEC returns an ECDSA P-256 key (ES256).
func NewEC(kid string) *Key {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return &Key{KID: kid, Alg: jose.ES256, Private: k}
}

// NewEd25519 returns an Ed25519 key (EdDSA).
func NewEd25519(kid string) *Key {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return &Key{KID: kid, Alg: jose.EdDSA, Private: k}
}

// JWK is the public half as a JWK with kid, alg and use "sig".
func (k *Key) JWK() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.Private.Public(), KeyID: k.KID, Algorithm: string(k.Alg), Use: "sig"}
}

// Sign returns a compact JWS of claims (marshalled to JSON) with the key's alg and kid.
func (k *Key) Sign(claims any) string { return k.SignOpts(claims, true) }

// SignOpts is Sign, with the kid header only when withKID.
func (k *Key) SignOpts(claims any, withKID bool) string {
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if withKID {
		opts = opts.WithHeader(jose.HeaderKey("kid"), k.KID)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: k.Alg, Key: k.Private}, opts)
	if err != nil {
		panic(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	obj, err := s.Sign(payload)
	if err != nil {
		panic(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		panic(err)
	}
	return out
}

// Claims are the registered claims of a token that verifies for issuer and audience, valid from
// a minute ago for an hour, plus extra.
func Claims(issuer, audience string, extra map[string]any) map[string]any {
	now := time.Now()
	c := map[string]any{"iss": issuer, "aud": audience, "sub": "user-1",
		"iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// JWKS is the JSON Web Key Set of the keys' public halves.
func JWKS(keys ...*Key) []byte {
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range keys {
		set.Keys = append(set.Keys, k.JWK())
	}
	b, err := json.Marshal(set)
	if err != nil {
		panic(fmt.Sprintf("jwttest: %v", err))
	}
	return b
}

// Server serves a JWKS on loopback; Rotate replaces its keys.
type Server struct {
	*httptest.Server

	mu           sync.Mutex
	body         []byte
	status       int
	cacheControl string
	hits         atomic.Int64
	hit          chan struct{}
}

// NewServer starts an HTTP (or, with tls, HTTPS: use s.Client() or s.Certificate()) JWKS server
// serving keys. It closes with Close.
func NewServer(tls bool, keys ...*Key) *Server {
	s := &Server{body: JWKS(keys...), status: http.StatusOK, hit: make(chan struct{}, 1)}
	h := http.HandlerFunc(s.serve)
	if tls {
		s.Server = httptest.NewTLSServer(h)
	} else {
		s.Server = httptest.NewServer(h)
	}
	return s
}

func (s *Server) serve(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	body, status, cc := s.body, s.status, s.cacheControl
	s.mu.Unlock()
	s.hits.Add(1)
	select {
	case s.hit <- struct{}{}:
	default:
	}
	if cc != "" {
		w.Header().Set("Cache-Control", cc)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status == http.StatusOK {
		_, _ = w.Write(body)
	}
}

// URL of the JWKS.
func (s *Server) JWKSURL() string { return s.URL + "/.well-known/jwks.json" }

// Rotate serves the keys' JWKS from now on.
func (s *Server) Rotate(keys ...*Key) { s.SetBody(JWKS(keys...)) }

// SetBody serves body (status 200) from now on.
func (s *Server) SetBody(body []byte) {
	s.mu.Lock()
	s.body, s.status = body, http.StatusOK
	s.mu.Unlock()
}

// Fail answers status (500, say) from now on, until Rotate or SetBody.
func (s *Server) Fail(status int) {
	s.mu.Lock()
	s.status = status
	s.mu.Unlock()
}

// SetCacheControl sets the Cache-Control header of the answers ("max-age=1").
func (s *Server) SetCacheControl(v string) {
	s.mu.Lock()
	s.cacheControl = v
	s.mu.Unlock()
}

// Hits is the number of requests served.
func (s *Server) Hits() int64 { return s.hits.Load() }

// Hit receives after a request was served (it holds at most one pending signal).
func (s *Server) Hit() <-chan struct{} { return s.hit }
