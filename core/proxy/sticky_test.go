package proxy_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net"
	"strconv"
	"strings"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// Session persistence through the engine: real backends on loopback that answer their name in
// X-Backend, behind a cluster with IR SessionPersistence.

var sessKey = []byte("a per-cluster secret")

const sessCookie = "sess"

// sticky gives c session persistence of type typ on name.
func sticky(c *irv1.Cluster, typ irv1.SessionPersistence_Type, name string) *irv1.Cluster {
	c.SessionPersistence = &irv1.SessionPersistence{Type: typ, Name: name, Key: sessKey}
	return c
}

// wantToken is the token the IR's contract gives the endpoint 127.0.0.1:port under key:
// base64url(HMAC-SHA256(key, "address:port")[:16]).
func wantToken(key []byte, port uint32) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("127.0.0.1:" + strconv.Itoa(int(port))))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

func wantSetCookie(port uint32) string {
	return sessCookie + "=" + wantToken(sessKey, port) + "; Path=/; HttpOnly"
}

// stickyEnv is a proxy in front of n backends b0..b(n-1) whose cluster "be" has session
// persistence.
type stickyEnv struct {
	p      *proxy.Proxy
	c      *client
	bs     []*testBackend
	byName map[string]*testBackend
	typ    irv1.SessionPersistence_Type
	name   string
	l      *irv1.Listener
}

func startSticky(t *testing.T, typ irv1.SessionPersistence_Type, name string, n int) *stickyEnv {
	t.Helper()
	e := &stickyEnv{byName: map[string]*testBackend{}, typ: typ, name: name}
	for i := range n {
		b := newBackend(t, "b"+strconv.Itoa(i), nil)
		e.bs = append(e.bs, b)
		e.byName[b.name] = b
	}
	e.l = httpListener(0, server("", vhost("", route("r", "/", backend("be", 1)))))
	e.p = newProxy(t)
	apply(t, e.p, e.snap(t, e.bs...))
	e.c = newClient(addrOf(t, e.p, e.l.Name), nil)
	return e
}

// snap is the env's snapshot with the backends bs as the cluster's endpoints.
func (e *stickyEnv) snap(t *testing.T, bs ...*testBackend) *irv1.Snapshot {
	return snapshot(t, []*irv1.Listener{e.l}, []*irv1.Cluster{sticky(cluster("be", bs...), e.typ, e.name)})
}

// get sends a GET with the header fields hdr (name, value, ...) and returns the backend that
// answered and the response's Set-Cookie fields.
func (e *stickyEnv) get(t *testing.T, c *client, hdr ...string) (*testBackend, []string) {
	t.Helper()
	r := must(t, c.get("http://example.com/", hdr...))
	b := e.byName[r.header.Get("X-Backend")]
	if r.status != 200 || b == nil {
		t.Fatalf("status %d from backend %q: %s", r.status, r.header.Get("X-Backend"), r.body)
	}
	return b, r.header.Values("Set-Cookie")
}

// tokenOf returns the token of the one Set-Cookie field, which must be b's, exactly as the IR
// specifies it.
func tokenOf(t *testing.T, b *testBackend, set []string) string {
	t.Helper()
	if len(set) != 1 || set[0] != wantSetCookie(b.port) {
		t.Fatalf("backend %s answered Set-Cookie %q, want [%q]", b.name, set, wantSetCookie(b.port))
	}
	return wantToken(sessKey, b.port)
}

// TestStickyCookie: a first request gets the chosen backend's cookie, with the exact attributes;
// every later request carrying it reaches that backend and gets no cookie again.
func TestStickyCookie(t *testing.T) {
	e := startSticky(t, irv1.SessionPersistence_COOKIE, sessCookie, 4)
	tokens := map[*testBackend]string{}
	for range 8 { // round robin: every backend is chosen twice
		b, set := e.get(t, e.c)
		tokens[b] = tokenOf(t, b, set)
	}
	if len(tokens) != len(e.bs) {
		t.Fatalf("first requests reached %d backends, want %d", len(tokens), len(e.bs))
	}
	for b, tok := range tokens {
		for i, cookie := range []string{
			sessCookie + "=" + tok,
			"theme=dark; " + sessCookie + "=" + tok + "; lang=en",
			sessCookie + `="` + tok + `"`,
		} {
			for range 5 {
				got, set := e.get(t, e.c, "Cookie", cookie)
				if got != b || set != nil {
					t.Fatalf("cookie form %d of %s's token: backend %s, Set-Cookie %q", i, b.name, got.name, set)
				}
			}
		}
	}
}

// TestStickyTokenHidesAddress: a token shows its endpoint's address in no encoding tried.
func TestStickyTokenHidesAddress(t *testing.T) {
	e := startSticky(t, irv1.SessionPersistence_COOKIE, sessCookie, 3)
	for range 3 {
		b, set := e.get(t, e.c)
		tok := tokenOf(t, b, set)
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(raw) != 16 {
			t.Fatalf("token %q is not 16 bytes of base64url: %v", tok, err)
		}
		hostPort := "127.0.0.1:" + strconv.Itoa(int(b.port))
		port := []byte{byte(b.port >> 8), byte(b.port)}
		forms := []string{hostPort, "127.0.0.1", strconv.Itoa(int(b.port)), "7f000001",
			hex.EncodeToString([]byte(hostPort)), hex.EncodeToString(append(net.IPv4(127, 0, 0, 1).To4(), port...))}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			forms = append(forms, enc.EncodeToString([]byte(hostPort)), strings.TrimRight(enc.EncodeToString([]byte("127.0.0.1")), "="))
		}
		for _, f := range forms {
			if strings.Contains(strings.ToLower(tok), strings.ToLower(f)) {
				t.Errorf("token %s of %s contains %q", tok, hostPort, f)
			}
		}
		for _, f := range [][]byte{{127, 0, 0, 1}, []byte(hostPort), []byte("127.0.0.1")} {
			if strings.Contains(string(raw), string(f)) {
				t.Errorf("token %s of %s decodes to bytes containing %q", tok, hostPort, f)
			}
		}
	}
}

// TestStickyForgedToken: a token that is not a current endpoint's selects nothing: the balancer
// picks and the response pins the client with a fresh cookie of the backend that answered.
func TestStickyForgedToken(t *testing.T) {
	e := startSticky(t, irv1.SessionPersistence_COOKIE, sessCookie, 3)
	b0 := e.bs[0]
	otherKey := hmac.New(sha256.New, []byte("another key"))
	otherKey.Write([]byte("127.0.0.1:" + strconv.Itoa(int(b0.port))))
	for _, forged := range []string{
		"AAAAAAAAAAAAAAAAAAAAAA",
		base64.RawURLEncoding.EncodeToString(otherKey.Sum(nil)[:16]), // b0's, under another key
		"127.0.0.1:" + strconv.Itoa(int(b0.port)),
		base64.RawURLEncoding.EncodeToString([]byte("127.0.0.1:" + strconv.Itoa(int(b0.port)))),
		wantToken(sessKey, b0.port)[:21], // a prefix of a real one
	} {
		b, set := e.get(t, e.c, "Cookie", sessCookie+"="+forged)
		tok := tokenOf(t, b, set)
		if got, set := e.get(t, e.c, "Cookie", sessCookie+"="+tok); got != b || set != nil {
			t.Fatalf("after forged %q: the fresh cookie of %s led to %s, Set-Cookie %q", forged, b.name, got.name, set)
		}
	}
}

// TestStickyEndpointGone: when an endpoint-only update removes the pinned backend, its cookie
// leads elsewhere with a new cookie; a backend that comes back at its address is reached by its
// old cookie again, and a rebuilt table keeps every pin (no server-side state).
func TestStickyEndpointGone(t *testing.T) {
	e := startSticky(t, irv1.SessionPersistence_COOKIE, sessCookie, 3)
	first, set := e.get(t, e.c)
	old := tokenOf(t, first, set)
	var rest []*testBackend
	for _, b := range e.bs {
		if b != first {
			rest = append(rest, b)
		}
	}
	applyInPlace(t, e.p, e.snap(t, rest...))
	b, set := e.get(t, e.c, "Cookie", sessCookie+"="+old)
	if b == first {
		t.Fatalf("the removed backend %s still got a request", first.name)
	}
	fresh := tokenOf(t, b, set)
	for range 5 {
		if got, set := e.get(t, e.c, "Cookie", sessCookie+"="+fresh); got != b || set != nil {
			t.Fatalf("the re-pinned cookie of %s led to %s, Set-Cookie %q", b.name, got.name, set)
		}
	}

	applyInPlace(t, e.p, e.snap(t, e.bs...))
	if got, set := e.get(t, e.c, "Cookie", sessCookie+"="+old); got != first || set != nil {
		t.Fatalf("backend %s is back, but its cookie led to %s, Set-Cookie %q", first.name, got.name, set)
	}

	before := proxy.TableOf(e.p)
	e.l.Servers[0].VirtualHosts[0].Routes[0].Name = "renamed"
	apply(t, e.p, e.snap(t, e.bs...))
	if proxy.TableOf(e.p) == before {
		t.Fatal("the renamed route did not rebuild the table")
	}
	for _, tok := range []string{old, fresh} {
		if _, set := e.get(t, e.c, "Cookie", sessCookie+"="+tok); set != nil {
			t.Errorf("after a rebuild, token %s was pinned again: Set-Cookie %q", tok, set)
		}
	}
}

// TestStickyHeader: one header value reaches one backend, many values spread over all of them,
// requests without the header (or with an empty one) are balanced, and nothing sets a cookie.
// Removing a backend moves only the values it had.
func TestStickyHeader(t *testing.T) {
	const n, values = 4, 400
	e := startSticky(t, irv1.SessionPersistence_HEADER, "x-session", n) // canonicalized by the engine
	where := make([]*testBackend, values)
	count := map[*testBackend]int{}
	for v := range values {
		id := "user-" + strconv.Itoa(v)
		b, set := e.get(t, e.c, "X-Session", id)
		if set != nil {
			t.Fatalf("header mode set a cookie: %q", set)
		}
		if v < 40 {
			for range 3 {
				if got, _ := e.get(t, e.c, "X-Session", id); got != b {
					t.Fatalf("value %s reached %s, then %s", id, b.name, got.name)
				}
			}
		}
		where[v] = b
		count[b]++
	}
	for _, b := range e.bs {
		if c := count[b]; c < values/n/2 || c > values/n*3/2 {
			t.Errorf("backend %s has %d of %d values, want about %d", b.name, c, values, values/n)
		}
	}
	spread := map[*testBackend]bool{}
	for i := range 2 * n {
		var hdr []string
		if i%2 == 1 {
			hdr = []string{"X-Session", ""}
		}
		b, set := e.get(t, e.c, hdr...)
		if set != nil {
			t.Fatalf("header mode set a cookie: %q", set)
		}
		spread[b] = true
	}
	if len(spread) != n {
		t.Errorf("requests without the header reached %d backends, want all %d (balanced)", len(spread), n)
	}

	gone := e.bs[1]
	applyInPlace(t, e.p, e.snap(t, e.bs[0], e.bs[2], e.bs[3]))
	for v, was := range where {
		got, _ := e.get(t, e.c, "X-Session", "user-"+strconv.Itoa(v))
		if got == gone || (was != gone && got != was) {
			t.Fatalf("value %d: backend %s before, %s after %s left", v, was.name, got.name, gone.name)
		}
	}
}

// TestStickyTwoProxiesAgree: two engines given the same snapshot send a cookie, and a header
// value, to the same backend: the pin is a function of the snapshot and the request alone.
func TestStickyTwoProxiesAgree(t *testing.T) {
	bs := []*testBackend{newBackend(t, "b0", nil), newBackend(t, "b1", nil), newBackend(t, "b2", nil)}
	byName := map[string]*testBackend{}
	for _, b := range bs {
		byName[b.name] = b
	}
	l := httpListener(0, server("", vhost("",
		route("c", "/c", backend("cookie", 1)), route("h", "/h", backend("header", 1)))))
	clusters := []*irv1.Cluster{
		sticky(cluster("cookie", bs...), irv1.SessionPersistence_COOKIE, sessCookie),
		sticky(cluster("header", bs...), irv1.SessionPersistence_HEADER, "X-Session"),
	}
	var cs []*client
	for range 2 {
		p := newProxy(t)
		apply(t, p, snapshot(t, []*irv1.Listener{l}, clusters))
		cs = append(cs, newClient(addrOf(t, p, l.Name), nil))
	}
	get := func(c *client, path string, hdr ...string) (string, []string) {
		r := must(t, c.get("http://example.com"+path, hdr...))
		if r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		return r.header.Get("X-Backend"), r.header.Values("Set-Cookie")
	}
	for i := range 6 {
		a, b := cs[i%2], cs[1-i%2]
		name, set := get(a, "/c")
		tok := tokenOf(t, byName[name], set)
		if got, set := get(b, "/c", "Cookie", sessCookie+"="+tok); got != name || set != nil {
			t.Fatalf("the other proxy sent %s's cookie to %s, Set-Cookie %q", name, got, set)
		}
	}
	for v := range 50 {
		id := "user-" + strconv.Itoa(v)
		a, _ := get(cs[0], "/h", "X-Session", id)
		if b, _ := get(cs[1], "/h", "X-Session", id); a != b {
			t.Fatalf("value %s: one proxy chose %s, the other %s", id, a, b)
		}
	}
}
