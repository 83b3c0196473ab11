package lbtest

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/lb/ewma"
	"github.com/coxswain-labs/coxswain/modules/lb/hash"
	"github.com/coxswain-labs/coxswain/modules/lb/leastconn"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

// stockBalancers are the stock lb.* modules with a config each.
var stockBalancers = []struct {
	mod core.Module
	mc  *irv1.ModuleConfig
}{
	{&roundrobin.RoundRobin{}, core.MustConfig(roundrobin.ModuleID, struct{}{})},
	{&leastconn.LeastConn{}, core.MustConfig(leastconn.ModuleID, struct{}{})},
	{&ewma.EWMA{}, core.MustConfig(ewma.ModuleID, struct{}{})},
	{&hash.Hash{}, core.MustConfig(hash.ModuleID, hash.Config{Key: hash.KeyURI})},
}

// TestSessionPersistence: in front of every stock balancer, a session cookie pins its backend
// until an endpoint-only update removes it (then the balancer picks and the client is pinned
// again), and a session header keeps its value on one backend.
func TestSessionPersistence(t *testing.T) {
	for _, sb := range stockBalancers {
		t.Run(sb.mc.GetId()+"/cookie", func(t *testing.T) {
			sp := &irv1.SessionPersistence{Type: irv1.SessionPersistence_COOKIE, Name: "__coxswain_session", Key: []byte("k")}
			h := Options{SessionPersistence: sp}.Start(t, sb.mod, sb.mc, nil, nil, nil)
			first, cookie := pinned(t, h, nil)
			for range 10 {
				if i, hdr, err := h.GetHeader("/x", cookie); err != nil || i != first || hdr["Set-Cookie"] != nil {
					t.Fatalf("with the cookie of backend %d: backend %d, Set-Cookie %q (%v)", first, i, hdr["Set-Cookie"], err)
				}
			}
			var rest []int
			for i := range 3 {
				if i != first {
					rest = append(rest, i)
				}
			}
			h.Keep(t, rest...)
			next, fresh := pinned(t, h, cookie)
			if next == first {
				t.Fatalf("the removed backend %d still got a request", first)
			}
			if i, hdr, err := h.GetHeader("/", fresh); err != nil || i != next || hdr["Set-Cookie"] != nil {
				t.Fatalf("with the new cookie of backend %d: backend %d, Set-Cookie %q (%v)", next, i, hdr["Set-Cookie"], err)
			}
		})
		t.Run(sb.mc.GetId()+"/header", func(t *testing.T) {
			sp := &irv1.SessionPersistence{Type: irv1.SessionPersistence_HEADER, Name: "X-Session"}
			h := Options{SessionPersistence: sp}.Start(t, sb.mod, sb.mc, nil, nil, nil)
			for u := range 10 {
				hdr := http.Header{"X-Session": {"user-" + strconv.Itoa(u)}}
				first, err := h.Get("/"+strconv.Itoa(u), hdr)
				if err != nil {
					t.Fatal(err)
				}
				for range 5 {
					if i, resp, err := h.GetHeader("/", hdr); err != nil || i != first || resp["Set-Cookie"] != nil {
						t.Fatalf("user %d: backend %d, then %d, Set-Cookie %q (%v)", u, first, i, resp["Set-Cookie"], err)
					}
				}
			}
		})
	}
}

// pinned sends a request with the header hdr, which must be answered with one session cookie, and
// returns the backend and a header carrying that cookie.
func pinned(t *testing.T, h *Harness, hdr http.Header) (int, http.Header) {
	t.Helper()
	i, resp, err := h.GetHeader("/", hdr)
	if err != nil {
		t.Fatal(err)
	}
	set := resp["Set-Cookie"]
	if len(set) != 1 || !strings.HasPrefix(set[0], "__coxswain_session=") || !strings.HasSuffix(set[0], "; Path=/; HttpOnly") {
		t.Fatalf("backend %d answered Set-Cookie %q, want one session cookie", i, set)
	}
	kv, _, _ := strings.Cut(set[0], ";")
	return i, http.Header{"Cookie": {kv}}
}
