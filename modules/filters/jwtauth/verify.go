package jwtauth

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// Leeway is the clock skew allowed on exp and nbf.
	Leeway = 30 * time.Second
	// MaxTokenBytes bounds a token; a longer one is rejected before it is parsed.
	MaxTokenBytes = 16 << 10
	// CacheTTL caps how long a verified token is remembered (never past its exp).
	CacheTTL = 2 * time.Minute
	// cacheSlots is the size of the verified-token cache of one module instance (a power of 2).
	cacheSlots = 1024
)

// verified is a token that passed: what it puts on the request, and until when it may be reused.
type verified struct {
	sum     [sha256.Size]byte
	until   int64 // unix nanoseconds
	headers []headerValue
	payload string
}

type headerValue struct{ name, value string }

// cache remembers verified tokens by the SHA-256 of the token, direct-mapped: a slot holds one
// entry and a newer token whose hash lands there replaces it. A hit is an atomic load and a
// comparison, with no lock and no allocation; a miss costs one signature verification, exactly
// as if there were no cache, so eviction only costs time.
type cache struct {
	slots [cacheSlots]atomic.Pointer[verified]
}

func (c *cache) get(sum *[sha256.Size]byte, now int64) *verified {
	e := c.slots[binary.LittleEndian.Uint64(sum[:8])&(cacheSlots-1)].Load()
	if e != nil && e.sum == *sum && now < e.until {
		return e
	}
	return nil
}

func (c *cache) put(v *verified) {
	c.slots[binary.LittleEndian.Uint64(v.sum[:8])&(cacheSlots-1)].Store(v)
}

// errInvalid is a token that does not verify; its text is what the client is told.
type errInvalid string

func (e errInvalid) Error() string { return string(e) }

// claims are the registered claims checked. Numbers are float64: NumericDate may have a fraction.
type claims struct {
	Iss *string         `json:"iss"`
	Aud json.RawMessage `json:"aud"`
	Exp *float64        `json:"exp"`
	Nbf *float64        `json:"nbf"`
}

// verify checks tok and returns what it carries, from the cache when it was verified before.
func (f *JwtAuth) verify(tok string, now time.Time) (*verified, error) {
	if len(tok) > MaxTokenBytes {
		return nil, errInvalid("token too large")
	}
	sum := hashToken(tok)
	if v := f.cache.get(&sum, now.UnixNano()); v != nil {
		return v, nil
	}
	payload, err := f.checkSignature(tok)
	if err != nil {
		return nil, err
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, errInvalid("malformed claims")
	}
	until, err := f.checkClaims(&c, now)
	if err != nil {
		return nil, err
	}
	v := &verified{sum: sum, until: until}
	if f.ForwardPayloadHeader != "" {
		first := strings.IndexByte(tok, '.')
		second := first + 1 + strings.IndexByte(tok[first+1:], '.')
		v.payload = tok[first+1 : second]
	}
	if len(f.ClaimToHeaders) > 0 {
		v.headers = f.claimHeaders(payload)
	}
	f.cache.put(v)
	return v, nil
}

// hashToken is the SHA-256 of tok. A token of usual size is copied to the stack first: converting
// it to []byte would allocate.
func hashToken(tok string) [sha256.Size]byte {
	var buf [4096]byte
	if len(tok) <= len(buf) {
		n := copy(buf[:], tok)
		return sha256.Sum256(buf[:n])
	}
	return sha256.Sum256([]byte(tok))
}

// checkSignature parses tok as a compact JWS and verifies it with a key of the JWKS: the one
// its kid names, or, without a kid, each key whose algorithm is the token's. The algorithm is the
// key's: a token whose header names another one (none, HS256 with the public key as secret, an
// RSA alg against an EC key) matches no key.
func (f *JwtAuth) checkSignature(tok string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(tok, f.algs)
	if err != nil {
		return nil, errInvalid("malformed token or algorithm not accepted")
	}
	if len(jws.Signatures) != 1 {
		return nil, errInvalid("malformed token")
	}
	h := jws.Signatures[0].Protected
	if _, ok := h.ExtraHeaders["crit"]; ok {
		return nil, errInvalid("critical header parameters are not accepted")
	}
	if _, ok := h.ExtraHeaders["b64"]; ok {
		return nil, errInvalid("unencoded payloads are not accepted")
	}
	alg := jose.SignatureAlgorithm(h.Algorithm)
	kidFound := false
	for i := range f.keys {
		k := &f.keys[i]
		if h.KeyID != "" {
			if k.kid != h.KeyID {
				continue
			}
			kidFound = true
		}
		if k.alg != alg {
			continue
		}
		if payload, err := jws.Verify(k.pub); err == nil {
			return payload, nil
		}
	}
	if h.KeyID != "" && !kidFound {
		return nil, errInvalid("unknown kid")
	}
	return nil, errInvalid("signature does not verify")
}

// checkClaims checks iss, aud, exp and nbf, and returns until when the token may be cached.
func (f *JwtAuth) checkClaims(c *claims, now time.Time) (int64, error) {
	if c.Iss == nil || *c.Iss != f.Issuer {
		return 0, errInvalid("wrong issuer")
	}
	if len(f.Audiences) > 0 && !f.audienceOK(c.Aud) {
		return 0, errInvalid("wrong audience")
	}
	until := now.Add(CacheTTL).UnixNano()
	if c.Exp != nil {
		exp := unixNanos(*c.Exp)
		if now.Add(-Leeway).UnixNano() >= exp {
			return 0, errInvalid("token expired")
		}
		until = min(until, exp)
	}
	if c.Nbf != nil && now.Add(Leeway).UnixNano() < unixNanos(*c.Nbf) {
		return 0, errInvalid("token not valid yet")
	}
	return until, nil
}

// unixNanos is a NumericDate in unix nanoseconds, saturated.
func unixNanos(secs float64) int64 {
	if math.IsNaN(secs) || secs <= math.MinInt64/1e9 {
		return math.MinInt64
	}
	if secs >= math.MaxInt64/1e9 {
		return math.MaxInt64
	}
	return int64(secs * 1e9)
}

// audienceOK reports whether aud (a string or an array of strings) names one of the audiences.
func (f *JwtAuth) audienceOK(aud json.RawMessage) bool {
	var one string
	if err := json.Unmarshal(aud, &one); err == nil {
		return f.audiences[one]
	}
	var many []string
	if err := json.Unmarshal(aud, &many); err != nil {
		return false
	}
	for _, a := range many {
		if f.audiences[a] {
			return true
		}
	}
	return false
}

// claimHeaders are the claimToHeaders values of a verified payload.
func (f *JwtAuth) claimHeaders(payload []byte) []headerValue {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(payload, &all); err != nil {
		return nil
	}
	var out []headerValue
	for _, ch := range f.ClaimToHeaders {
		raw, ok := all[ch.Claim]
		if !ok {
			continue
		}
		v, ok := claimValue(raw)
		if !ok {
			continue
		}
		out = append(out, headerValue{name: http.CanonicalHeaderKey(ch.Header), value: v})
	}
	return out
}

// claimValue is a claim as a header value: a string as is, null as nothing, anything else as its
// compact JSON; then every control character (CR, LF, NUL, DEL, ...; tab stays) is made a space,
// so that a claim can neither split the header nor be refused by the transport.
func claimValue(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		if string(bytes.TrimSpace(raw)) == "null" {
			return "", false
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return "", false
		}
		s = buf.String()
	}
	return sanitize(s), true
}

func sanitize(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return strings.TrimSpace(s)
	}
	b := []byte(s)
	for i, c := range b {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			b[i] = ' '
		}
	}
	return strings.TrimSpace(string(b))
}

var errNoToken = errors.New("no token")
