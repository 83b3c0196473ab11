// Package basicauth is the BasicAuth filter, "filter.ext.gateway.coxswain-labs.dev.BasicAuth": it
// lets through the requests that carry the credentials of a user of an htpasswd file (RFC 7617
// Basic authentication) and answers the others with 401 and a challenge. An HTTPRoute rule
// references a BasicAuth object with an ExtensionRef filter; the object names a Secret, which the
// controller-side resolver (package translate) reads and parses, so the proxy receives the users
// and their hashes in the module's Config and never the Secret.
//
// bcrypt is slow on purpose (tens of milliseconds per check at the usual cost), so credentials
// once verified are remembered: a fixed-size table of keyed SHA-256 digests of the Authorization
// header, looked up without a lock. The table belongs to one config: a Secret change is a new
// config, hence a new table, and a credential the new file rejects is never taken from the old.
package basicauth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1" // {SHA} entries are accepted for compatibility, and reported as weak
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*BasicAuth)(nil))
}

var (
	_ core.ExtensionKind     = (*BasicAuth)(nil)
	_ core.HTTPRequestFilter = (*BasicAuth)(nil)
	_ core.Provisioner       = (*BasicAuth)(nil)
	_ core.Validator         = (*BasicAuth)(nil)
	_ core.ConfigChecker     = (*BasicAuth)(nil)
	_ core.ConfigWarner      = (*BasicAuth)(nil)
)

// API is the resource behind this module's ExtensionRefs. A reference to a BasicAuth that does not
// exist fails open, as Coxswain's filter kinds do (the route says so: ResolvedRefs=False,
// FilterNotFound); one whose Secret cannot be used fails closed (503). GRPCRoute rules cannot use
// it: Basic authentication is a browser-facing HTTP scheme.
var API = core.ExtensionAPI{
	Group:    "gateway.coxswain-labs.dev",
	Kind:     "BasicAuth",
	Version:  "v1alpha1",
	Resource: "basicauths",
	FailOpen: true,
}

// maxAuthorization is the longest Authorization header value checked; a longer one is refused
// without being decoded or hashed. Basic credentials are a user name and a password; 4 KiB of
// base64 is far more than either needs.
const maxAuthorization = 4096

// BasicAuth is the module.
type BasicAuth struct {
	Config

	log       *zap.Logger
	users     map[string]*verifier
	challenge []string // the WWW-Authenticate value, shared by every 401 (never appended to: cap == len)
	cache     *cache   // nil: every request is verified (the uncached benchmark)
}

// verifier checks one user's password.
type verifier struct {
	bcrypt []byte          // the bcrypt hash, or nil for a {SHA} one
	sha    [sha1.Size]byte // the {SHA} digest
}

func (v *verifier) verify(password []byte) bool {
	if v.bcrypt != nil {
		return bcrypt.CompareHashAndPassword(v.bcrypt, password) == nil
	}
	d := sha1.Sum(password) // see shaPrefix
	return subtle.ConstantTimeCompare(d[:], v.sha[:]) == 1
}

// CoxswainModule implements core.Module.
func (*BasicAuth) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(BasicAuth) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*BasicAuth) ExtensionAPI() core.ExtensionAPI { return API }

// ExtensionRouteKinds implements core.ExtensionRouteKinds.
func (*BasicAuth) ExtensionRouteKinds() (supported, ignored []string) {
	return []string{"HTTPRoute", "Ingress"}, nil
}

// CheckConfig implements core.ConfigChecker: the resolver's output, checked as the proxy will.
func (f *BasicAuth) CheckConfig() error {
	_, err := f.verifiers()
	return err
}

// Validate implements core.Validator.
func (f *BasicAuth) Validate() error { return f.CheckConfig() }

// ConfigWarnings implements core.ConfigWarner: {SHA} hashes are unsalted SHA-1, which a stolen
// Secret gives up to a dictionary at once.
func (f *BasicAuth) ConfigWarnings() []string {
	var weak []string
	for _, u := range f.Users {
		if kindOf(u.Hash) == hashSHA {
			weak = append(weak, fmt.Sprintf("%q", u.Name))
		}
	}
	if len(weak) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("user %s has a {SHA} hash (unsalted SHA-1), which is weak: prefer bcrypt (htpasswd -B)",
		strings.Join(weak, ", "))}
}

// verifiers checks the config and compiles its users.
func (f *BasicAuth) verifiers() (map[string]*verifier, error) {
	if err := checkRealm(f.Realm); err != nil {
		return nil, err
	}
	switch {
	case f.Closed != "" && len(f.Users) > 0:
		return nil, errors.New("closed and users are exclusive")
	case f.Closed == "" && len(f.Users) == 0:
		return nil, errors.New("no users (a config without users must say why it is closed)")
	}
	users := make(map[string]*verifier, len(f.Users))
	for i, u := range f.Users {
		if u.Name == "" || strings.ContainsRune(u.Name, ':') || !validName([]byte(u.Name)) {
			return nil, fmt.Errorf("users[%d]: invalid user name %q", i, u.Name)
		}
		if users[u.Name] != nil {
			return nil, fmt.Errorf("users[%d]: user %q is repeated", i, u.Name)
		}
		if err := checkHash(u.Hash); err != nil {
			return nil, fmt.Errorf("users[%d] (%q): %w", i, u.Name, err)
		}
		v := new(verifier)
		if kindOf(u.Hash) == hashBcrypt {
			v.bcrypt = []byte(u.Hash)
		} else {
			v.sha, _ = shaDigest(u.Hash)
		}
		users[u.Name] = v
	}
	return users, nil
}

// checkRealm keeps the realm a valid quoted-string without escapes.
func checkRealm(realm string) error {
	if realm == "" || len(realm) > 256 {
		return fmt.Errorf("realm must be 1 to 256 characters")
	}
	for i := 0; i < len(realm); i++ {
		if c := realm[i]; c < 0x20 || c == 0x7f || c == '"' || c == '\\' {
			return fmt.Errorf("realm %q: quotes, backslashes and control characters are not allowed", realm)
		}
	}
	return nil
}

// Provision compiles the users and takes the credential cache of this config: tables built from
// the same config (a snapshot that changed something else) share one, so a push does not make
// every user pay bcrypt again.
func (f *BasicAuth) Provision(bc *core.BuildContext) error {
	users, err := f.verifiers()
	if err != nil {
		return err
	}
	f.users = users
	f.challenge = []string{`Basic realm="` + f.Realm + `"`}
	f.log = zap.NewNop()
	if bc == nil {
		f.cache = newCache()
		return nil
	}
	f.log = bc.Log
	cfg, err := json.Marshal(f.Config)
	if err != nil {
		return err
	}
	digest := sha256.Sum256(cfg)
	f.cache, err = core.Shared(bc, ModuleID+" "+hex.EncodeToString(digest[:]), func() (*cache, error) {
		// Once per config while a table holds it, not at every push.
		f.logConfig()
		return newCache(), nil
	})
	return err
}

func (f *BasicAuth) logConfig() {
	if f.Closed != "" {
		f.log.Warn("BasicAuth cannot check credentials: every request of its rules is answered 503",
			zap.String("realm", f.Realm), zap.String("reason", f.Closed))
	}
	for _, w := range f.ConfigWarnings() {
		f.log.Warn("BasicAuth accepts a weak hash", zap.String("realm", f.Realm), zap.String("warning", w))
	}
}

// FilterRequest lets a request with valid credentials through, without its Authorization header
// unless ForwardCredentials, and answers any other with 401 and the challenge (503 when closed).
func (f *BasicAuth) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	if f.Closed != "" {
		core.Deny(w, r, http.StatusServiceUnavailable, core.GRPCUnavailable, "authentication is not available")
		return false
	}
	// More than one Authorization header is not a request a client makes; refuse it rather than
	// guess which one a backend would read.
	if v := r.Header["Authorization"]; len(v) == 1 && f.authorized(v[0]) {
		if !f.ForwardCredentials {
			delete(r.Header, "Authorization")
		}
		return true
	}
	w.Header()["Www-Authenticate"] = f.challenge
	core.Deny(w, r, http.StatusUnauthorized, core.GRPCUnauthenticated, "unauthorized")
	return false
}

// authorized checks an Authorization header value, from the cache when it was verified before.
func (f *BasicAuth) authorized(v string) bool {
	if len(v) > maxAuthorization {
		return false
	}
	if f.cache == nil {
		return f.verify(v)
	}
	sum := f.cache.sum(v)
	if f.cache.has(&sum) {
		return true
	}
	if !f.verify(v) {
		return false
	}
	f.cache.add(&sum)
	return true
}

// verify decodes "Basic base64(user:password)" and checks the password: the slow path.
func (f *BasicAuth) verify(v string) bool {
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.Trim(token, " \t"))
	if err != nil {
		return false
	}
	name, password, ok := bytes.Cut(raw, []byte{':'})
	if !ok {
		return false
	}
	u := f.users[string(name)]
	if u == nil {
		return false
	}
	return u.verify(password)
}

// cacheSlots is the number of verified credentials remembered per config. A new credential takes
// the slot its digest falls in, replacing what was there: the table never grows, and only
// credentials that verified can enter it, so a client without valid ones cannot evict anybody.
const cacheSlots = 1024

// cache remembers verified Authorization header values as SHA-256(key ‖ value), key being random
// per cache: the digests reveal nothing without it, and the table holds no password.
type cache struct {
	key   [32]byte
	slots [cacheSlots]atomic.Pointer[[sha256.Size]byte]
}

func newCache() *cache {
	c := new(cache)
	_, _ = rand.Read(c.key[:]) // never fails (crypto/rand.Read crashes the program instead)
	return c
}

func (c *cache) sum(v string) [sha256.Size]byte {
	if len(v) > shortAuthorization {
		h := sha256.New()
		h.Write(c.key[:])
		h.Write([]byte(v))
		var sum [sha256.Size]byte
		h.Sum(sum[:0])
		return sum
	}
	var buf [32 + shortAuthorization]byte // on the stack: hashing a usual credential allocates nothing
	n := copy(buf[:], c.key[:])
	n += copy(buf[n:], v)
	return sha256.Sum256(buf[:n])
}

// shortAuthorization is the longest header value hashed in a stack buffer: the usual ones (a
// 64-byte user name and password are 180 bytes of header), without zeroing 4 KiB per request.
const shortAuthorization = 224

func (c *cache) slot(sum *[sha256.Size]byte) *atomic.Pointer[[sha256.Size]byte] {
	return &c.slots[binary.LittleEndian.Uint64(sum[:8])%cacheSlots]
}

func (c *cache) has(sum *[sha256.Size]byte) bool {
	p := c.slot(sum).Load()
	return p != nil && subtle.ConstantTimeCompare(p[:], sum[:]) == 1
}

func (c *cache) add(sum *[sha256.Size]byte) {
	p := new([sha256.Size]byte)
	*p = *sum
	c.slot(sum).Store(p)
}
