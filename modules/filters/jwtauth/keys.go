package jwtauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	jose "github.com/go-jose/go-jose/v4"
)

// Algorithms are the signature algorithms a key may have; anything else (none, HS*, ...) never
// verifies a token.
var Algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// minRSABits is the smallest RSA modulus accepted.
const minRSABits = 2048

// key is one verification key of the JWKS: its public key and the one algorithm it verifies.
type key struct {
	kid string
	alg jose.SignatureAlgorithm
	pub any // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// ParseJWKS parses a JWKS document into its usable verification keys. A key that cannot be used
// is left out with a warning saying why: an unknown or symmetric key type, use other than "sig",
// an alg outside Algorithms or not matching the key type, an RSA key without alg (RS256 and PS256
// keys look the same: there is no inferring it), an RSA modulus under 2048 bits. A key with
// private parts is used for its public half, with a warning. No usable key at all is an error.
func ParseJWKS(doc []byte) (keys []key, warnings []string, err error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		return nil, nil, fmt.Errorf("JWKS: %w", err)
	}
	for i, raw := range set.Keys {
		k, warn, err := parseKey(raw)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("JWKS key %d: %v; left out", i, err))
			continue
		}
		if warn != "" {
			warnings = append(warnings, fmt.Sprintf("JWKS key %d: %s", i, warn))
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		msg := "JWKS has no usable signing key"
		if len(warnings) > 0 {
			msg += " (" + warnings[0] + ")"
		}
		return nil, warnings, errors.New(msg)
	}
	return keys, warnings, nil
}

func parseKey(raw json.RawMessage) (key, string, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return key{}, "", err
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return key{}, "", fmt.Errorf("use %q is not sig", jwk.Use)
	}
	warn := ""
	if !jwk.IsPublic() {
		if _, sym := jwk.Key.([]byte); sym {
			return key{}, "", errors.New("symmetric keys are not accepted")
		}
		jwk = jwk.Public()
		warn = "it has private key parts, which do not belong in a JWKS; its public half is used"
	}
	alg := jose.SignatureAlgorithm(jwk.Algorithm)
	if alg != "" && !slices.Contains(Algorithms, alg) {
		return key{}, "", fmt.Errorf("alg %q is not accepted (only %v)", alg, Algorithms)
	}
	k := key{kid: jwk.KeyID, pub: jwk.Key}
	switch pub := jwk.Key.(type) {
	case *rsa.PublicKey:
		if pub.N.BitLen() < minRSABits {
			return key{}, "", fmt.Errorf("RSA key of %d bits (at least %d)", pub.N.BitLen(), minRSABits)
		}
		switch alg {
		case jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
			k.alg = alg
		case "":
			return key{}, "", errors.New("an RSA key needs an alg (RS256 or PS256, say): it cannot be inferred")
		default:
			return key{}, "", fmt.Errorf("alg %s is not an RSA algorithm", alg)
		}
	case *ecdsa.PublicKey:
		want := map[elliptic.Curve]jose.SignatureAlgorithm{
			elliptic.P256(): jose.ES256, elliptic.P384(): jose.ES384, elliptic.P521(): jose.ES512}[pub.Curve]
		if want == "" {
			return key{}, "", errors.New("unsupported curve")
		}
		if alg != "" && alg != want {
			return key{}, "", fmt.Errorf("alg %s does not go with curve %s (%s)", alg, pub.Curve.Params().Name, want)
		}
		k.alg = want
	case ed25519.PublicKey:
		if alg != "" && alg != jose.EdDSA {
			return key{}, "", fmt.Errorf("alg %s does not go with an Ed25519 key (EdDSA)", alg)
		}
		k.alg = jose.EdDSA
	default:
		return key{}, "", fmt.Errorf("key type %T is not accepted", jwk.Key)
	}
	return k, warn, nil
}
