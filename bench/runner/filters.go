package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// filterData is what the filters benchmark adds to the peers' configurations: a JwtAuth key and
// a token it accepts, and an htpasswd file (one bcrypt user) for BasicAuth and nginx's
// auth_basic.
type filterData struct {
	JWKS, Token      string
	Htpasswd         string // the file's one line
	HtpasswdFile     string
	BasicUser, Basic string // user and the Authorization header value
	BcryptCost       int
}

// benchBcryptCost is the cost of the benchmark's htpasswd hash: bcrypt's minimum plus one, so
// that a proxy without a verified-credential cache (nginx) still serves a measurable rate.
const benchBcryptCost = 5

// newFilterData makes the key, the token and the htpasswd file in dir.
func newFilterData(dir string) (*filterData, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	b64 := base64.RawURLEncoding.EncodeToString
	pad := func(n *big.Int) string { return b64(n.FillBytes(make([]byte, 32))) }
	jwks, _ := json.Marshal(map[string]any{"keys": []any{map[string]string{
		"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": "bench",
		"x": pad(key.X), "y": pad(key.Y),
	}}})
	header := b64([]byte(`{"alg":"ES256","kid":"bench","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"iss": "https://bench.coxswain.invalid", "aud": "bench", "sub": "load",
		"exp": time.Now().Add(24 * time.Hour).Unix(), "iat": time.Now().Unix()})
	signing := header + "." + b64(claims)
	sum := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		return nil, err
	}
	sig := append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	hash, err := bcrypt.GenerateFromPassword([]byte("bench-password"), benchBcryptCost)
	if err != nil {
		return nil, err
	}
	fd := &filterData{JWKS: string(jwks), Token: signing + "." + b64(sig), BasicUser: "bench",
		Htpasswd: "bench:" + string(hash), HtpasswdFile: filepath.Join(dir, "htpasswd"), BcryptCost: benchBcryptCost}
	fd.Basic = "Basic " + base64.StdEncoding.EncodeToString([]byte("bench:bench-password"))
	// nginx's workers run as nobody and read the file per request: the scratch directory (0700
	// from MkdirTemp) must let them through to it.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	return fd, os.WriteFile(fd.HtpasswdFile, []byte(fd.Htpasswd+"\n"), 0o644)
}

// filters measures Coxswain's filter modules on the HTTP/1.1 keep-alive path:
//   - chain: a route through IpAccessControl + RateLimit + JwtAuth (ES256, the token cached
//     after its first verification) against the plain route, same process, same run;
//   - basic: BasicAuth against nginx's auth_basic on the same htpasswd (bcrypt);
//   - gzip: Compression against nginx's gzip, both at level 6, on the 16 KiB body.
func (e *env) filters() error {
	names, err := e.startPeers(e.order()...)
	if err != nil {
		return err
	}
	cox, ok := e.peers["coxswain"]
	if !ok {
		return fmt.Errorf("the filters benchmark needs the coxswain peer")
	}
	keys := []string{"rps", "cpu_us_per_req", "p50_us", "p99_us", "errors", "non2xx"}
	const conns = 64
	run := func(bench, kase string, peers []string, path func(pe *peer) string, headers ...string) error {
		err := e.rounds(bench, kase, peers, func(pe *peer) (map[string]float64, error) {
			return e.keepAlive(pe, path(pe), conns, headers...)
		})
		if err != nil {
			return err
		}
		e.res.summarize(os.Stdout, bench, kase, peers, keys)
		return nil
	}

	// The chain against the plain route: two "peers" that are one Coxswain process.
	plain := &peer{name: "coxswain-plain", http: cox.http, p: cox.p}
	chain := &peer{name: "coxswain-chain", http: cox.http, p: cox.p}
	e.peers[plain.name], e.peers[chain.name] = plain, chain
	defer delete(e.peers, plain.name)
	defer delete(e.peers, chain.name)
	if err := run("FILTERS", fmt.Sprintf("chain body=12 conns=%d", conns), []string{plain.name, chain.name},
		func(pe *peer) string {
			if pe == chain {
				return pe.http + "/chain/12"
			}
			return pe.http + "/12"
		}, "Authorization: Bearer "+e.data.Filters.Token); err != nil {
		return err
	}

	var withNginx []string
	for _, n := range names {
		if n == "coxswain" || n == "nginx" {
			withNginx = append(withNginx, n)
		}
	}
	if !slices.Contains(withNginx, "nginx") {
		e.res.note(os.Stdout, "FILTERS: nginx is not among the peers; basic and gzip measure Coxswain alone")
	}
	if err := run("FILTERS", fmt.Sprintf("basic bcrypt-cost=%d body=12 conns=%d", benchBcryptCost, conns), withNginx,
		func(pe *peer) string { return pe.http + "/basic/12" }, "Authorization: "+e.data.Filters.Basic); err != nil {
		return err
	}
	return run("FILTERS", fmt.Sprintf("gzip level=6 body=16k conns=%d", conns), withNginx,
		func(pe *peer) string { return pe.http + "/gzip/16k" }, "Accept-Encoding: gzip")
}
