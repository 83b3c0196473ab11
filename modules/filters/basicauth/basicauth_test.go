package basicauth

import (
	"context"
	"crypto/sha1" // the {SHA} format under test
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/coxswain-labs/coxswain/core"
)

func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
}

func newFilter(t testing.TB, c Config) *BasicAuth {
	t.Helper()
	f := &BasicAuth{Config: c}
	if err := f.Provision(nil); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return f
}

// run sends one request with the given Authorization values through f.
func run(f *BasicAuth, auth ...string) (proceed bool, w *httptest.ResponseRecorder, r *http.Request) {
	r = httptest.NewRequest(http.MethodGet, "/admin", nil)
	for _, a := range auth {
		r.Header.Add("Authorization", a)
	}
	w = httptest.NewRecorder()
	return f.FilterRequest(w, r), w, r
}

func TestFilterRequest(t *testing.T) {
	users := []User{
		{Name: "alice", Hash: hashOf(t, "wonderland", "$2y$")},
		{Name: "bob", Hash: hashOf(t, "builder", "$2b$")},
		{Name: "dave", Hash: shaOfSecret},
		{Name: "émile", Hash: hashOf(t, "pâté:with colon", "$2a$")},
	}
	f := newFilter(t, Config{Realm: "default/admin", Users: users})
	for _, tc := range []struct {
		name string
		auth []string
		ok   bool
	}{
		{"bcrypt 2y", []string{basic("alice", "wonderland")}, true},
		{"bcrypt 2b", []string{basic("bob", "builder")}, true},
		{"sha", []string{basic("dave", "secret")}, true},
		{"utf-8 and a colon in the password", []string{basic("émile", "pâté:with colon")}, true},
		{"scheme is case-insensitive", []string{"basic " + basic("alice", "wonderland")[6:]}, true},
		{"spaces around the token", []string{"Basic   " + basic("alice", "wonderland")[6:] + " "}, true},
		{"wrong password", []string{basic("alice", "Wonderland")}, false},
		{"sha wrong password", []string{basic("dave", "secreT")}, false},
		{"unknown user", []string{basic("mallory", "wonderland")}, false},
		{"no header", nil, false},
		{"empty header", []string{""}, false},
		{"other scheme", []string{"Bearer " + basic("alice", "wonderland")[6:]}, false},
		{"no token", []string{"Basic"}, false},
		{"not base64", []string{"Basic !!!"}, false},
		{"no colon", []string{"Basic " + base64.StdEncoding.EncodeToString([]byte("alice"))}, false},
		{"unpadded base64", []string{"Basic " + base64.RawStdEncoding.EncodeToString([]byte("alice:wonderland"))}, false},
		{"two headers", []string{basic("alice", "wonderland"), basic("alice", "wonderland")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, w, r := run(f, tc.auth...)
			if ok != tc.ok {
				t.Fatalf("proceed = %v, want %v (status %d)", ok, tc.ok, w.Code)
			}
			if ok {
				if _, kept := r.Header["Authorization"]; kept {
					t.Error("the Authorization header is sent upstream")
				}
				return
			}
			if w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != `Basic realm="default/admin"` {
				t.Errorf("answer %d, WWW-Authenticate %q; want 401 with the challenge", w.Code, w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

func TestForwardCredentials(t *testing.T) {
	f := newFilter(t, Config{Realm: "r", ForwardCredentials: true, Users: []User{{Name: "alice", Hash: shaOfSecret}}})
	ok, _, r := run(f, basic("alice", "secret"))
	if !ok || r.Header.Get("Authorization") != basic("alice", "secret") {
		t.Errorf("proceed %v, Authorization %q: want it kept", ok, r.Header.Get("Authorization"))
	}
}

func TestClosed(t *testing.T) {
	f := newFilter(t, Config{Realm: "r", Closed: "Secret default/htpasswd does not exist"})
	ok, w, _ := run(f, basic("alice", "secret"))
	if ok || w.Code != http.StatusServiceUnavailable || w.Header().Get("WWW-Authenticate") != "" {
		t.Errorf("proceed %v, status %d, challenge %q: want 503 without a challenge", ok, w.Code, w.Header().Get("WWW-Authenticate"))
	}
	if strings.Contains(w.Body.String(), "htpasswd") {
		t.Errorf("the 503 body %q tells the client the reason", w.Body)
	}
}

// TestHugeAuthorization: a header far above the bound is refused at once, without decoding or
// hashing it; one just within it is decoded and checked as any other.
func TestHugeAuthorization(t *testing.T) {
	f := newFilter(t, Config{Realm: "r", Users: []User{{Name: "alice", Hash: hashOf(t, "x", "$2y$")}}})
	huge := "Basic " + strings.Repeat("QUFB", 4<<20) // 16 MiB of valid base64
	start := time.Now()
	if ok, w, _ := run(f, huge); ok || w.Code != http.StatusUnauthorized {
		t.Errorf("16 MiB header: proceed %v status %d", ok, w.Code)
	}
	if n := testing.AllocsPerRun(10, func() { f.authorized(huge) }); n != 0 {
		t.Errorf("a refused huge header costs %v allocations: it must not be decoded", n)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing huge headers took %s", d)
	}
	// Exactly at the bound: a long password still verifies.
	long := strings.Repeat("p", base64.StdEncoding.DecodedLen(maxAuthorization-len("Basic "))-len("alice:"))
	g := newFilter(t, Config{Realm: "r", Users: []User{{Name: "alice", Hash: shaPassword(long)}}})
	v := basic("alice", long)
	if len(v) > maxAuthorization {
		t.Fatalf("test header %d bytes, bound %d", len(v), maxAuthorization)
	}
	if ok, w, _ := run(g, v); !ok {
		t.Errorf("a %d-byte header within the bound: status %d", len(v), w.Code)
	}
	if ok, _, _ := run(g, v+"AAAA"); ok {
		t.Error("a header above the bound was accepted")
	}
}

func shaPassword(p string) string {
	d := sha1.Sum([]byte(p)) // the {SHA} format under test
	return shaPrefix + base64.StdEncoding.EncodeToString(d[:])
}

// TestCache: a verified credential is not verified again; the cache belongs to the config, so a
// new config (a changed Secret) verifies against the new file.
func TestCache(t *testing.T) {
	old := Config{Realm: "r", Users: []User{{Name: "alice", Hash: hashOf(t, "old", "$2y$")}}}
	f := newFilter(t, old)
	auth := basic("alice", "old")
	if ok, _, _ := run(f, auth); !ok {
		t.Fatal("first request refused")
	}
	sum := f.cache.sum(auth)
	if !f.cache.has(&sum) {
		t.Fatal("a verified credential is not cached")
	}
	// The cached answer is the one served: replacing the user's verifier with one that refuses
	// everything does not change it.
	f.users["alice"] = &verifier{bcrypt: []byte("$2y$04$" + strings.Repeat(".", 53))}
	if ok, _, _ := run(f, auth); !ok {
		t.Error("a cached credential was verified again")
	}
	if ok, _, _ := run(f, basic("alice", "other")); ok {
		t.Error("an uncached wrong password was accepted")
	}

	reg := core.NewRegistry((*BasicAuth)(nil))
	shared := core.NewSharedState()
	load := func(c Config) *BasicAuth {
		bc := core.NewBuildContext(context.Background(), nil, reg, nil)
		bc.Shared = shared
		t.Cleanup(func() { _ = bc.Close() })
		m, err := core.Load[core.HTTPRequestFilter](bc, core.MustConfig(ModuleID, c))
		if err != nil {
			t.Fatal(err)
		}
		return m.(*BasicAuth)
	}
	a, b := load(old), load(old)
	if a.cache != b.cache {
		t.Error("two tables of the same config do not share the cache")
	}
	changed := Config{Realm: "r", Users: []User{{Name: "alice", Hash: hashOf(t, "new", "$2y$")}}}
	c := load(changed)
	if c.cache == a.cache {
		t.Fatal("a changed config shares the old config's cache")
	}
	if ok, _, _ := run(a, auth); !ok {
		t.Fatal("old table refused the old password")
	}
	if ok, _, _ := run(c, auth); ok {
		t.Error("the new config accepts the old password")
	}
	if ok, _, _ := run(c, basic("alice", "new")); !ok {
		t.Error("the new config refuses the new password")
	}
}

// TestCachedDoesNotAllocate: the hot path of a returning user costs no allocation.
func TestCachedDoesNotAllocate(t *testing.T) {
	f := newFilter(t, Config{Realm: "r", Users: []User{{Name: "alice", Hash: hashOf(t, "x", "$2y$")}}})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	auth := []string{basic("alice", "x")}
	r.Header["Authorization"] = auth
	if !f.FilterRequest(nil, r) {
		t.Fatal("refused")
	}
	if n := testing.AllocsPerRun(100, func() {
		r.Header["Authorization"] = auth
		f.FilterRequest(nil, r)
	}); n != 0 {
		t.Errorf("a cached credential costs %v allocations, want 0", n)
	}
}

func TestCheckConfig(t *testing.T) {
	ok := []User{{Name: "alice", Hash: shaOfSecret}}
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"no realm", Config{Users: ok}, "realm must be"},
		{"quote in realm", Config{Realm: `a"b`, Users: ok}, "quotes"},
		{"control in realm", Config{Realm: "a\nb", Users: ok}, "control"},
		{"neither users nor closed", Config{Realm: "r"}, "no users"},
		{"both", Config{Realm: "r", Users: ok, Closed: "x"}, "exclusive"},
		{"colon in name", Config{Realm: "r", Users: []User{{Name: "a:b", Hash: shaOfSecret}}}, "invalid user name"},
		{"repeated", Config{Realm: "r", Users: append(ok, ok...)}, "repeated"},
		{"bad hash", Config{Realm: "r", Users: []User{{Name: "a", Hash: "$apr1$x$y"}}}, "MD5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &BasicAuth{Config: tc.c}
			if err := f.CheckConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckConfig = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestConfigWarnings(t *testing.T) {
	f := &BasicAuth{Config: Config{Realm: "r", Users: []User{{Name: "alice", Hash: hashOf(t, "x", "$2y$")}, {Name: "dave", Hash: shaOfSecret}}}}
	w := f.ConfigWarnings()
	if len(w) != 1 || !strings.Contains(w[0], `"dave"`) || strings.Contains(w[0], "alice") || !strings.Contains(w[0], "weak") {
		t.Errorf("warnings %q: want one naming dave's {SHA} hash as weak", w)
	}
}

// TestLoad goes through core.Load: strict decoding of the resolver's output, and the declared
// resource matches the module ID.
func TestLoad(t *testing.T) {
	reg := core.NewRegistry((*BasicAuth)(nil))
	bc := core.NewBuildContext(context.Background(), nil, reg, nil)
	t.Cleanup(func() { _ = bc.Close() })
	mc := core.MustConfig(ModuleID, nil)
	mc.Json = []byte(`{"realm":"default/a","users":[{"name":"alice","hash":"` + shaOfSecret + `"}]}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, mc); err != nil {
		t.Errorf("Load: %v", err)
	}
	// The object's spec is not the config: without the resolver it does not load.
	mc.Json = []byte(`{"secretRef":{"name":"x"}}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, mc); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("a spec as config: error = %v", err)
	}
	if err := API.Check(ModuleID); err != nil {
		t.Error(err)
	}
	exts, errs := core.NewRegistry((*BasicAuth)(nil)).Extensions()
	if len(errs) != 0 || !reflect.DeepEqual(exts[ModuleID], API) {
		t.Errorf("Extensions() = %v, %v; want %s: %+v", exts, errs, ModuleID, API)
	}
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Errorf("%s is not registered", ModuleID)
	}
}

// BenchmarkBasicAuth is one request with valid credentials: verified each time (the cache off:
// what every request would cost without it) and from the cache, at bcrypt's default cost (10)
// and htpasswd -B's (5), and for a {SHA} entry.
func BenchmarkBasicAuth(b *testing.B) {
	for _, tc := range []struct {
		name   string
		hash   func() string
		cached bool
	}{
		{"bcrypt10/uncached", bcryptAt(b, 10), false},
		{"bcrypt10/cached", bcryptAt(b, 10), true},
		{"bcrypt5/uncached", bcryptAt(b, 5), false},
		{"bcrypt5/cached", bcryptAt(b, 5), true},
		{"sha/uncached", func() string { return shaOfSecret }, false},
		{"sha/cached", func() string { return shaOfSecret }, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFilter(b, Config{Realm: "r", Users: []User{{Name: "alice", Hash: tc.hash()}}})
			if !tc.cached {
				f.cache = nil
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			auth := []string{basic("alice", "secret")}
			r.Header["Authorization"] = auth
			if !f.FilterRequest(nil, r) { // the cache, when on, holds the credential from here
				b.Fatal("refused")
			}
			b.ReportAllocs()
			for b.Loop() {
				r.Header["Authorization"] = auth
				if !f.FilterRequest(nil, r) {
					b.Fatal("refused")
				}
			}
		})
	}
}

func bcryptAt(b *testing.B, cost int) func() string {
	return func() string {
		h, err := bcrypt.GenerateFromPassword([]byte("secret"), cost)
		if err != nil {
			b.Fatal(err)
		}
		return string(h)
	}
}
