// Command jwtmint prints a JWT for the JwtAuth example (examples/filters/jwtauth.yaml), signed with
// the example's demo key.
//
// DEMO ONLY: demo-key.jwk is a private key committed to the repository on purpose, so that the
// example can be tried; a JwtAuth that trusts it accepts tokens from anyone.
//
//	go run ./examples/filters/jwtmint -sub alice [-ttl 1h] [-aud filters-example] [-key FILE]
package main

import (
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

//go:embed demo-key.jwk
var demoKey []byte

func main() {
	sub := flag.String("sub", "demo-user", "the token's sub claim")
	iss := flag.String("iss", "https://demo.coxswain.invalid", "the token's iss claim")
	aud := flag.String("aud", "filters-example", "the token's aud claim")
	ttl := flag.Duration("ttl", time.Hour, "how long the token is valid")
	keyFile := flag.String("key", "", "a private JWK to sign with instead of the demo key")
	flag.Parse()
	if err := run(*sub, *iss, *aud, *ttl, *keyFile); err != nil {
		fmt.Fprintln(os.Stderr, "jwtmint:", err)
		os.Exit(1)
	}
}

func run(sub, iss, aud string, ttl time.Duration, keyFile string) error {
	raw := demoKey
	if keyFile != "" {
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return err
		}
		raw = b
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return fmt.Errorf("the key: %w", err)
	}
	if jwk.IsPublic() {
		return fmt.Errorf("the key has no private part")
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(jwk.Algorithm), Key: jwk.Key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", jwk.KeyID))
	if err != nil {
		return err
	}
	now := time.Now()
	payload, err := json.Marshal(map[string]any{"iss": iss, "aud": aud, "sub": sub,
		"iat": now.Unix(), "exp": now.Add(ttl).Unix()})
	if err != nil {
		return err
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		return err
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		return err
	}
	fmt.Println(tok)
	return nil
}
