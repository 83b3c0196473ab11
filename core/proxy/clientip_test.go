package proxy_test

import (
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/modules/filters/ipaccess"
	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit"
	"github.com/coxswain-labs/coxswain/modules/lb/hash"
)

func moduleJSON(id core.ModuleID, json string) *irv1.ModuleConfig {
	mc := core.MustConfig(id, nil)
	mc.Json = []byte(json)
	return mc
}

// perClientSnapshot is one HTTP listener (trusting hops X-Forwarded-For entries, optionally
// behind the PROXY protocol) whose route denies 198.51.100.66 (IpAccessControl), admits one
// request per client per hour (RateLimit on ClientIP) and balances by hash:source-ip over two
// backends.
func perClientSnapshot(t *testing.T, port, hops uint32, pp bool, a, b *testBackend) *irv1.Snapshot {
	t.Helper()
	rt := route("r", "/", backend("hashed", 1))
	rt.Filters = []*irv1.ModuleConfig{
		moduleJSON(ipaccess.ModuleID, `{"deny":["198.51.100.66"]}`),
		moduleJSON(ratelimit.ModuleID, `{"requests":1,"unit":"Hour"}`),
	}
	l := httpListener(port, server("", vhost("", rt)))
	if hops > 0 {
		l.ClientIpDetection = &irv1.ClientIPDetection{XffNumTrustedHops: hops}
	}
	if pp {
		l.ProxyProtocol = &irv1.ProxyProtocol{}
	}
	cl := cluster("hashed", a, b)
	cl.Balancer = core.MustConfig(hash.ModuleID, hash.Config{Key: hash.KeySourceIP})
	return snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cl})
}

// TestTrustedHops: with N trusted hops, IpAccessControl, RateLimit and hash:source-ip all see the
// address N entries from the right of X-Forwarded-For (the peer when the header is too short),
// and the backend still gets the chain with the peer appended.
func TestTrustedHops(t *testing.T) {
	a, b := newBackend(t, "a", nil), newBackend(t, "b", nil)
	for _, tc := range []struct {
		hops uint32
		xff  func(client string) string // a header whose N-th entry from the right is client
	}{
		{1, func(c string) string { return "192.0.2.250, " + c }},
		{2, func(c string) string { return "192.0.2.250, " + c + ", 10.0.0.1" }},
	} {
		p := newClientProxy(t, proxy.Limits{})
		apply(t, p, perClientSnapshot(t, 0, tc.hops, false, a, b))
		addr := addrOf(t, p, "127.0.0.1:0/HTTP")
		c := newClient(addr, nil)
		get := func(xff string) result {
			return must(t, c.get("http://example.com/", "X-Forwarded-For", xff))
		}

		// IpAccessControl: the resolved client is denied whatever the peer; the same address
		// elsewhere in the chain is not the client.
		if r := get(tc.xff("198.51.100.66")); r.status != 403 {
			t.Errorf("N=%d: denied client: status %d", tc.hops, r.status)
		}
		if r := get("198.51.100.66, " + tc.xff("198.51.100.67")); r.status != 200 {
			t.Errorf("N=%d: a denied address left of the client: status %d", tc.hops, r.status)
		} else if want := "198.51.100.66, " + tc.xff("198.51.100.67") + ", 127.0.0.1"; r.header.Get("X-Got-XFF") != want {
			t.Errorf("N=%d: backend saw X-Forwarded-For %q, want %q", tc.hops, r.header.Get("X-Got-XFF"), want)
		}

		// RateLimit: one request per resolved client, however the spoofable part varies.
		if r := get("1.1.1.1, " + tc.xff("198.51.100.67")); r.status != 429 {
			t.Errorf("N=%d: second request of a client: status %d, want 429", tc.hops, r.status)
		}
		if r := get(tc.xff("198.51.100.68")); r.status != 200 {
			t.Errorf("N=%d: another client: status %d", tc.hops, r.status)
		}

		// Too short: the peer is the client (its first request passes, its second is limited).
		short := "198.51.100.66"
		if tc.hops == 1 {
			short = ""
		}
		if r := must(t, c.get("http://example.com/", "X-Forwarded-For", short)); r.status != 200 {
			t.Errorf("N=%d: too short a header: status %d (the peer's first request)", tc.hops, r.status)
		}

		// hash:source-ip: by the resolved client. Each client is new to the rate limit.
		seen := map[string]string{}
		for i := range 32 {
			client := "203.0.113." + itoa(uint32(i))
			r1 := get(tc.xff(client))
			if r1.status != 200 {
				t.Fatalf("N=%d: %s: status %d", tc.hops, client, r1.status)
			}
			seen[client] = r1.header.Get("X-Backend")
		}
		backends := map[string]bool{}
		for _, be := range seen {
			backends[be] = true
		}
		if len(backends) != 2 {
			t.Errorf("N=%d: 32 clients hashed to %v", tc.hops, backends)
		}
		// The same client again, with other entries left of it: the same backend.
		// (A second request would be rate limited, so ask the hash through a fresh proxy.)
		p2 := newClientProxy(t, proxy.Limits{})
		apply(t, p2, perClientSnapshot(t, 0, tc.hops, false, a, b))
		c2 := newClient(addrOf(t, p2, "127.0.0.1:0/HTTP"), nil)
		for client, be := range seen {
			r := must(t, c2.get("http://example.com/", "X-Forwarded-For", "192.0.2.99, 192.0.2.98, "+tc.xff(client)))
			if r.status != 200 || r.header.Get("X-Backend") != be {
				t.Errorf("N=%d: %s went to %s (status %d), then to %s", tc.hops, client, be, r.status, r.header.Get("X-Backend"))
			}
		}
	}
}

// TestTrustedHopsBehindProxyProtocol: without X-Forwarded-For (or too short a one) the client
// is the PROXY protocol source, for IpAccessControl too.
func TestTrustedHopsBehindProxyProtocol(t *testing.T) {
	a, b := newBackend(t, "a", nil), newBackend(t, "b", nil)
	p := newClientProxy(t, proxy.Limits{})
	apply(t, p, perClientSnapshot(t, 0, 1, true, a, b))
	addr := addrOf(t, p, "127.0.0.1:0/HTTP")
	if r := must(t, ppClient(addr, ppHeader(t, 2, "198.51.100.66:1"), false).get("http://example.com/")); r.status != 403 {
		t.Errorf("PROXY source denied: status %d", r.status)
	}
	r := must(t, ppClient(addr, ppHeader(t, 1, "198.51.100.66:1"), false).get("http://example.com/", "X-Forwarded-For", "203.0.113.1"))
	if r.status != 200 || r.header.Get("X-Got-XFF") != "203.0.113.1, 198.51.100.66" {
		t.Errorf("a trusted hop's client: status %d, backend saw %q", r.status, r.header.Get("X-Got-XFF"))
	}
	if r := must(t, ppClient(addr, ppHeader(t, 1, "198.51.100.67:1"), false).get("http://example.com/")); r.status != 200 {
		t.Errorf("an allowed PROXY source: status %d", r.status)
	}
}
