package hash

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/hrw"
	"github.com/coxswain-labs/coxswain/modules/lb/lbtest"
)

func load(t testing.TB, cfg Config) core.Balancer {
	t.Helper()
	return lbtest.Load(t, &Hash{}, core.MustConfig(ModuleID, cfg))
}

// kinds are the key kinds, each with a request for key k and one without any key.
var kinds = []struct {
	name    string
	cfg     Config
	info    func(k int) *core.PickInfo
	missing *core.PickInfo
}{
	{"source-ip", Config{Key: KeySourceIP}, func(k int) *core.PickInfo {
		return &core.PickInfo{Client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(k >> 16), byte(k >> 8), byte(k)}), uint16(40000+k%1000))}
	}, &core.PickInfo{}},
	{"uri", Config{Key: KeyURI}, func(k int) *core.PickInfo {
		return &core.PickInfo{Request: request(fmt.Sprintf("/items/%d?page=%d", k/3, k%3), nil)}
	}, &core.PickInfo{}},
	{"header", Config{Key: KeyHeader, Name: "x-user"}, func(k int) *core.PickInfo {
		return &core.PickInfo{Request: request("/", http.Header{"X-User": {"user-" + strconv.Itoa(k)}})}
	}, &core.PickInfo{Request: request("/", http.Header{"X-Other": {"a"}})}},
	{"cookie", Config{Key: KeyCookie, Name: "session"}, func(k int) *core.PickInfo {
		return &core.PickInfo{Request: request("/", http.Header{"Cookie": {"theme=dark; session=s" + strconv.Itoa(k)}})}
	}, &core.PickInfo{Request: request("/", http.Header{"Cookie": {"theme=dark"}})}},
}

func request(target string, h http.Header) *http.Request {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		panic(err)
	}
	if h == nil {
		h = http.Header{}
	}
	return &http.Request{Method: http.MethodGet, URL: u, Header: h}
}

func TestConfig(t *testing.T) {
	cases := []struct {
		name string
		json string
		ok   bool
	}{
		{"source-ip", `{"key":"source-ip"}`, true},
		{"uri", `{"key":"uri"}`, true},
		{"header", `{"key":"header","name":"X-User"}`, true},
		{"cookie", `{"key":"cookie","name":"session"}`, true},
		{"no key", `{}`, false},
		{"unknown key", `{"key":"body"}`, false},
		{"header without a name", `{"key":"header"}`, false},
		{"header name with a space", `{"key":"header","name":"X User"}`, false},
		{"cookie name with a semicolon", `{"key":"cookie","name":"a;b"}`, false},
		{"source-ip with a name", `{"key":"source-ip","name":"x"}`, false},
		{"unknown field", `{"key":"uri","x":1}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bc := core.NewBuildContext(t.Context(), nil, core.NewRegistry(&Hash{}), &irv1.Snapshot{})
			defer bc.Close()
			_, err := core.Load[core.Balancer](bc, &irv1.ModuleConfig{Id: string(ModuleID), Json: []byte(tc.json)})
			if (err == nil) != tc.ok {
				t.Errorf("Load(%s) error %v, want ok=%v", tc.json, err, tc.ok)
			}
		})
	}
}

func TestSameKeySameEndpoint(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			b := load(t, kind.cfg)
			b.SetEndpoints(lbtest.Endpoints(10))
			for k := range 200 {
				first := b.Pick(kind.info(k))
				for range 5 {
					if got := b.Pick(kind.info(k)); got != first {
						t.Fatalf("key %d went to %s, then to %s", k, first.HostPort, got.HostPort)
					}
				}
			}
		})
	}
}

// TestRemovingOneMovesOnlyItsKeys: with 10,000 keys over N endpoints, removing one moves exactly
// the keys it had, and those are about 1/N of them (the bound is 1.3/N).
func TestRemovingOneMovesOnlyItsKeys(t *testing.T) {
	const keys = 10000
	for _, kind := range kinds {
		for _, n := range []int{5, 10, 50} {
			t.Run(fmt.Sprintf("%s/%d", kind.name, n), func(t *testing.T) {
				b := load(t, kind.cfg)
				eps := lbtest.Endpoints(n)
				b.SetEndpoints(eps)
				before := make([]*core.Endpoint, keys)
				for k := range before {
					before[k] = b.Pick(kind.info(k))
				}
				gone := eps[n/2]
				b.SetEndpoints(append(eps[:n/2:n/2], eps[n/2+1:]...))
				moved := 0
				for k, was := range before {
					now := b.Pick(kind.info(k))
					switch {
					case now == gone:
						t.Fatalf("key %d still goes to the removed endpoint", k)
					case was != gone && now != was:
						t.Fatalf("key %d moved from %s, which is still there, to %s", k, was.HostPort, now.HostPort)
					case was == gone:
						moved++
					}
				}
				limit := keys * 13 / (10 * n)
				t.Logf("%d of %d keys moved (1/N = %d, bound %d)", moved, keys, keys/n, limit)
				if moved > limit || moved == 0 {
					t.Errorf("%d keys moved, want between 1 and %d", moved, limit)
				}
			})
		}
	}
}

// TestWeightedShares: with unequal weights each endpoint gets about its share of the keys.
func TestWeightedShares(t *testing.T) {
	const keys = 20000
	b := load(t, Config{Key: KeyHeader, Name: "X-User"})
	weights := []uint32{1, 2, 3, 4}
	eps := make([]*core.Endpoint, len(weights))
	for i, w := range weights {
		eps[i] = core.NewEndpoint("10.0.0."+strconv.Itoa(i+1), 80, w)
	}
	b.SetEndpoints(eps)
	got := map[*core.Endpoint]int{}
	for k := range keys {
		got[b.Pick(kinds[2].info(k))]++
	}
	for i, ep := range eps {
		want := keys * int(weights[i]) / 10
		if d := got[ep] - want; d < -want/10 || d > want/10 {
			t.Errorf("weight %d: %d keys, want %d ±10%%", weights[i], got[ep], want)
		}
	}
}

// TestMissingKeyRoundRobin: requests without the key are spread by round robin.
func TestMissingKeyRoundRobin(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			b := load(t, kind.cfg)
			eps := lbtest.Endpoints(3)
			b.SetEndpoints(eps)
			got := map[*core.Endpoint]int{}
			for range 30 {
				got[b.Pick(kind.missing)]++
			}
			for _, ep := range eps {
				if got[ep] != 10 {
					t.Errorf("%s picked %d of 30 times, want 10", ep.HostPort, got[ep])
				}
			}
		})
	}
}

func TestCookie(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		want  string
		ok    bool
	}{
		{"only", []string{"session=abc"}, "abc", true},
		{"among others", []string{"a=1; session=abc; b=2"}, "abc", true},
		{"second line", []string{"a=1", "session=abc"}, "abc", true},
		{"quoted", []string{`session="abc"`}, "abc", true},
		{"spaces", []string{"a=1;  session=abc ;b=2"}, "abc", true},
		{"prefix of another name", []string{"sessionid=x"}, "", false},
		{"suffix of another name", []string{"mysession=x"}, "", false},
		{"empty value", []string{"session="}, "", false},
		{"absent", []string{"a=1"}, "", false},
		{"no header", nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.lines != nil {
				h["Cookie"] = tc.lines
			}
			got, ok := cookie(h, "session")
			if got != tc.want || ok != tc.ok {
				t.Errorf("cookie = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestIPv4Forms: an IPv4 client hashes the same in its 4- and 16-byte (mapped) forms, and as a
// net.IP did before PickInfo.Client was a netip.AddrPort (the same clients keep their endpoint
// across the upgrade).
func TestIPv4Forms(t *testing.T) {
	a, _ := sourceIP(netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, 7}), 1))
	b, _ := sourceIP(netip.AddrPortFrom(netip.AddrFrom16(netip.AddrFrom4([4]byte{192, 0, 2, 7}).As16()), 2))
	if a != b {
		t.Fatal("the two forms of one IPv4 address hash differently")
	}
	k := hrw.Offset
	for _, c := range net.IPv4(192, 0, 2, 7).To16() {
		k = hrw.Byte(k, c)
	}
	if a != k {
		t.Fatal("an IPv4 client hashes differently than its net.IP form did")
	}
}

// TestConcurrentSetEndpoints runs Picks against SetEndpoints (run it with -race).
func TestConcurrentSetEndpoints(t *testing.T) {
	b := load(t, Config{Key: KeyURI})
	sets := [][]*core.Endpoint{lbtest.Endpoints(1), lbtest.Endpoints(5), nil, lbtest.Endpoints(50)}
	b.SetEndpoints(sets[0])
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				info := kinds[1].info(g*100 + i%100)
				if i%3 == 0 {
					info = kinds[1].missing
				}
				_ = b.Pick(info)
			}
		})
	}
	for i := range 2000 {
		b.SetEndpoints(sets[i%len(sets)])
	}
	close(stop)
	wg.Wait()
}

// TestEngineHeaderHash: through the real engine, one header value always reaches one backend,
// and requests without the header reach all of them.
func TestEngineHeaderHash(t *testing.T) {
	h := lbtest.Start(t, &Hash{}, core.MustConfig(ModuleID, Config{Key: KeyHeader, Name: "X-User"}), nil, nil, nil)
	seen := map[int]bool{}
	for u := range 30 {
		hdr := http.Header{"X-User": {"user-" + strconv.Itoa(u)}}
		first, err := h.Get("/", hdr)
		if err != nil {
			t.Fatal(err)
		}
		seen[first] = true
		for range 3 {
			if got, err := h.Get("/", hdr); err != nil || got != first {
				t.Fatalf("user %d: backend %d, then %d (%v)", u, first, got, err)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("30 users reached backends %v, want all 3", seen)
	}
	spread := map[int]bool{}
	for range 6 {
		i, err := h.Get("/", nil)
		if err != nil {
			t.Fatal(err)
		}
		spread[i] = true
	}
	if len(spread) != 3 {
		t.Errorf("requests without the header reached %v, want all 3 backends (round robin)", spread)
	}
}

// TestEngineSourceIP: through the real engine, a client's requests (over new connections too)
// all reach one backend: the engine hands the balancer the downstream peer.
func TestEngineSourceIP(t *testing.T) {
	h := lbtest.Start(t, &Hash{}, core.MustConfig(ModuleID, Config{Key: KeySourceIP}), nil, nil, nil)
	first, err := h.Get("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if i%5 == 0 {
			h.Client.CloseIdleConnections() // a new connection, a new source port
		}
		if got, err := h.Get("/", nil); err != nil || got != first {
			t.Fatalf("request %d: backend %d (%v), want %d as the first", i, got, err, first)
		}
	}
}

// TestEngineEndpointRemoved: through the real engine, when an endpoint-only snapshot removes one
// of three backends, the keys of the two others stay where they were.
func TestEngineEndpointRemoved(t *testing.T) {
	h := lbtest.Start(t, &Hash{}, core.MustConfig(ModuleID, Config{Key: KeyCookie, Name: "session"}), nil, nil, nil)
	const users = 60
	before := make([]int, users)
	hdr := func(u int) http.Header { return http.Header{"Cookie": {"session=u" + strconv.Itoa(u)}} }
	for u := range users {
		i, err := h.Get("/", hdr(u))
		if err != nil {
			t.Fatal(err)
		}
		before[u] = i
	}
	h.Keep(t, 0, 1)
	for u := range users {
		i, err := h.Get("/", hdr(u))
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 || (before[u] != 2 && i != before[u]) {
			t.Errorf("user %d: backend %d before, %d after backend 2 left", u, before[u], i)
		}
	}
}

func BenchmarkPick(b *testing.B) {
	infos := map[string]*core.PickInfo{
		"source-ip":   kinds[0].info(12345),
		"uri":         {Request: request("/items/12345", nil)},
		"uri-query":   kinds[1].info(12345),
		"header":      kinds[2].info(12345),
		"cookie":      kinds[3].info(12345),
		"missing-key": kinds[2].missing,
	}
	cfgs := map[string]Config{
		"source-ip": kinds[0].cfg, "uri": kinds[1].cfg, "uri-query": kinds[1].cfg,
		"header": kinds[2].cfg, "cookie": kinds[3].cfg, "missing-key": kinds[2].cfg,
	}
	for _, name := range []string{"source-ip", "uri", "uri-query", "header", "cookie", "missing-key"} {
		for _, n := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				bal := load(b, cfgs[name])
				bal.SetEndpoints(lbtest.Endpoints(n))
				info := infos[name]
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						_ = bal.Pick(info)
					}
				})
			})
		}
	}
}
