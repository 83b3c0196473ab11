package proxy

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	lbhash "github.com/coxswain-labs/coxswain/modules/lb/hash"
)

func testEndpoints(n int) []*core.Endpoint {
	eps := make([]*core.Endpoint, n)
	for i := range eps {
		eps[i] = core.NewEndpoint(fmt.Sprintf("10.0.%d.%d", i/250, i%250+1), 8080, 1)
	}
	return eps
}

func mustSticky(t testing.TB, typ irv1.SessionPersistence_Type, name string, eps []*core.Endpoint) *sticky {
	t.Helper()
	s, err := newSticky("ns/svc:80", &irv1.SessionPersistence{Type: typ, Name: name, Key: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	s.setEndpoints(eps)
	return s
}

func TestCookies(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"only", []string{"s=abc"}, []string{"abc"}},
		{"among others", []string{"a=1; s=abc; b=2"}, []string{"abc"}},
		{"twice (two paths)", []string{"s=abc; a=1; s=def"}, []string{"abc", "def"}},
		{"second line", []string{"a=1", "s=abc"}, []string{"abc"}},
		{"on both lines", []string{"s=abc", "x=1; s=def"}, []string{"abc", "def"}},
		{"quoted", []string{`s="abc"`}, []string{"abc"}},
		{"spaces and tabs", []string{"a=1;  s=abc \t;b=2"}, []string{"abc"}},
		{"prefix of another name", []string{"sx=1; xs=2"}, nil},
		{"empty value skipped", []string{"s=; s=abc"}, []string{"abc"}},
		{"empty lines", []string{"", ";;", "s=abc"}, []string{"abc"}},
		{"absent", []string{"a=1"}, nil},
		{"no header", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := cookies{lines: tc.lines, name: "s"}
			var got []string
			for v, ok := c.next(); ok; v, ok = c.next() {
				got = append(got, v)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("values %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewSticky(t *testing.T) {
	cases := []struct {
		name string
		sp   *irv1.SessionPersistence
		ok   bool
	}{
		{"cookie", &irv1.SessionPersistence{Type: irv1.SessionPersistence_COOKIE, Name: "__coxswain_session"}, true},
		{"header", &irv1.SessionPersistence{Type: irv1.SessionPersistence_HEADER, Name: "x-session"}, true},
		{"no name", &irv1.SessionPersistence{Type: irv1.SessionPersistence_COOKIE}, false},
		{"name with a separator", &irv1.SessionPersistence{Type: irv1.SessionPersistence_COOKIE, Name: "a;b"}, false},
		{"name with a space", &irv1.SessionPersistence{Type: irv1.SessionPersistence_HEADER, Name: "x session"}, false},
		{"unknown type", &irv1.SessionPersistence{Type: 7, Name: "s"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := newSticky("c", tc.sp); (err == nil) != tc.ok {
				t.Errorf("newSticky error %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestDerivedKey: without a key the tokens still work, agree across instances, and differ
// between clusters.
func TestDerivedKey(t *testing.T) {
	eps := testEndpoints(3)
	tokens := func(cluster string) []string {
		s, err := newSticky(cluster, &irv1.SessionPersistence{Name: "s"})
		if err != nil {
			t.Fatal(err)
		}
		s.setEndpoints(eps)
		var out []string
		for _, ep := range eps {
			out = append(out, s.pins.Load().byEp[ep].token)
		}
		return out
	}
	a, b, other := tokens("ns/a:80"), tokens("ns/a:80"), tokens("ns/b:80")
	if !slices.Equal(a, b) {
		t.Errorf("one cluster, two instances: tokens %v and %v", a, b)
	}
	for i := range a {
		if a[i] == other[i] {
			t.Errorf("endpoint %d has the same token in two clusters", i)
		}
	}
}

// TestTokensKeptAcrossUpdates: an endpoint that stays keeps its pin (no HMAC computed again), one
// that comes back gets the token it had.
func TestTokensKeptAcrossUpdates(t *testing.T) {
	eps := testEndpoints(3)
	s := mustSticky(t, irv1.SessionPersistence_COOKIE, "s", eps)
	before := s.pins.Load()
	s.setEndpoints(eps[:2])
	after := s.pins.Load()
	for _, ep := range eps[:2] {
		if after.byEp[ep] != before.byEp[ep] {
			t.Errorf("%s: a new pin for an endpoint that stayed", ep.HostPort)
		}
	}
	if after.byEp[eps[2]] != nil || after.byToken[before.byEp[eps[2]].token] != nil {
		t.Error("the removed endpoint still has a pin")
	}
	back := core.NewEndpoint("10.0.0.3", 8080, 1) // a new *Endpoint, the same address
	s.setEndpoints([]*core.Endpoint{eps[0], eps[1], back})
	if got := s.pins.Load().byEp[back].token; got != before.byEp[eps[2]].token {
		t.Errorf("an endpoint back at its address has token %s, want %s as before", got, before.byEp[eps[2]].token)
	}
}

// TestPinAppends: the Set-Cookie is appended after a cookie already set, and two responses never
// share the slice (copyFields appends the upstream's own Set-Cookie to it).
func TestPinAppends(t *testing.T) {
	eps := testEndpoints(2)
	s := mustSticky(t, irv1.SessionPersistence_COOKIE, "s", eps)
	r := &http.Request{Header: http.Header{}}
	w1, w2 := newHeaderWriter(), newHeaderWriter()
	w1.h["Set-Cookie"] = []string{"a=1"}
	s.pin(w1, r, eps[0])
	s.pin(w2, r, eps[0])
	want := s.pins.Load().byEp[eps[0]].setCookie
	if got := w1.h["Set-Cookie"]; !slices.Equal(got, []string{"a=1", want}) {
		t.Errorf("Set-Cookie %q", got)
	}
	w2.h["Set-Cookie"] = append(w2.h["Set-Cookie"], "b=2")
	w3 := newHeaderWriter()
	s.pin(w3, r, eps[0])
	if got := w3.h["Set-Cookie"]; !slices.Equal(got, []string{want}) {
		t.Errorf("a third response got Set-Cookie %q", got)
	}
	// A request that carries ep's token (among other cookies) is not told again.
	r.Header["Cookie"] = []string{"s=forged; s=" + s.pins.Load().byEp[eps[0]].token}
	w4 := newHeaderWriter()
	s.pin(w4, r, eps[0])
	if got := w4.h["Set-Cookie"]; got != nil {
		t.Errorf("a request carrying the token got Set-Cookie %q", got)
	}
	// An endpoint the pins do not know (picked from a set an update replaced) gets no cookie.
	s.pin(w4, &http.Request{Header: http.Header{}}, core.NewEndpoint("10.9.9.9", 1, 1))
	if got := w4.h["Set-Cookie"]; got != nil {
		t.Errorf("an unknown endpoint got Set-Cookie %q", got)
	}
}

// TestStickyConcurrentSetEndpoints runs pinned and pin against setEndpoints (run it with -race):
// a request sees one set's pins whole, and a pinned endpoint is always one of some set.
func TestStickyConcurrentSetEndpoints(t *testing.T) {
	all := testEndpoints(50)
	sets := [][]*core.Endpoint{all[:1], all[:5], nil, all, all[10:20]}
	for _, typ := range []irv1.SessionPersistence_Type{irv1.SessionPersistence_COOKIE, irv1.SessionPersistence_HEADER} {
		t.Run(typ.String(), func(t *testing.T) {
			s := mustSticky(t, typ, "S", sets[0])
			tokens := mustSticky(t, typ, "S", all).pins.Load() // every endpoint's token
			known := map[*core.Endpoint]bool{}
			for _, ep := range all {
				known[ep] = true
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for g := range 4 {
				wg.Go(func() {
					w := newHeaderWriter()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						r := &http.Request{Header: http.Header{"S": {strconv.Itoa(g*1000 + i%100)}}}
						if typ == irv1.SessionPersistence_COOKIE {
							r.Header["Cookie"] = []string{"S=" + tokens.byEp[all[i%len(all)]].token}
						}
						if ep := s.pinned(r); ep != nil && !known[ep] {
							t.Error("pinned an endpoint of no set")
							return
						}
						s.pin(w, r, all[i%len(all)])
						clear(w.h)
					}
				})
			}
			for i := range 2000 {
				s.setEndpoints(sets[i%len(sets)])
			}
			close(stop)
			wg.Wait()
		})
	}
}

// TestStickyHeaderAgreesWithLBHash: header persistence sends a value where lb.hash with the
// header key sends it, weighted or not: the two share core/proxy/hrw.
func TestStickyHeaderAgreesWithLBHash(t *testing.T) {
	for _, weighted := range []bool{false, true} {
		eps := testEndpoints(20)
		if weighted {
			for i, ep := range eps {
				eps[i] = core.NewEndpoint(ep.Address, ep.Port, uint32(1+i%3))
			}
		}
		s := mustSticky(t, irv1.SessionPersistence_HEADER, "x-user", eps)
		bc := core.NewBuildContext(t.Context(), nil, core.NewRegistry(&lbhash.Hash{}), &irv1.Snapshot{})
		defer bc.Close()
		bal, err := core.Load[core.Balancer](bc, core.MustConfig(lbhash.ModuleID, lbhash.Config{Key: lbhash.KeyHeader, Name: "X-User"}))
		if err != nil {
			t.Fatal(err)
		}
		bal.SetEndpoints(eps)
		for k := range 2000 {
			r := &http.Request{Header: http.Header{"X-User": {"user-" + strconv.Itoa(k)}}}
			if a, b := s.pinned(r), bal.Pick(&core.PickInfo{Request: r}); a != b {
				t.Fatalf("weighted %v, key %d: persistence chose %s, lb.hash %s", weighted, k, a.HostPort, b.HostPort)
			}
		}
	}
}

// headerWriter is a ResponseWriter that only has a header, reused by the benchmarks.
type headerWriter struct{ h http.Header }

func newHeaderWriter() *headerWriter                { return &headerWriter{h: http.Header{}} }
func (w *headerWriter) Header() http.Header         { return w.h }
func (w *headerWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerWriter) WriteHeader(int)             {}

// firstBalancer picks the first endpoint: the benchmarks' balancer, whose cost is not measured.
type firstBalancer struct{ eps []*core.Endpoint }

func (b *firstBalancer) SetEndpoints(eps []*core.Endpoint) { b.eps = eps }
func (b *firstBalancer) Pick(*core.PickInfo) *core.Endpoint {
	if len(b.eps) == 0 {
		return nil
	}
	return b.eps[0]
}

// BenchmarkStickyPick is upstream.pick of a cluster with session persistence at 1, 10 and 100
// endpoints: a request carrying a valid cookie (among others, as browsers send them), one carrying
// the header, and a first request (no cookie: the balancer picks and the response gets the
// Set-Cookie, the one allocation of the three).
func BenchmarkStickyPick(b *testing.B) {
	for _, mode := range []string{"cookie-pinned", "header", "cookie-first"} {
		for _, n := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("%s/%d", mode, n), func(b *testing.B) {
				eps := testEndpoints(n)
				typ, name := irv1.SessionPersistence_COOKIE, "__coxswain_session"
				if mode == "header" {
					typ, name = irv1.SessionPersistence_HEADER, "X-Session"
				}
				s := mustSticky(b, typ, name, eps)
				bal := &firstBalancer{}
				bal.SetEndpoints(eps)
				u := &upstream{cluster: &cluster{name: "c", balancer: bal, sticky: s}}
				r := &http.Request{Header: http.Header{}}
				want := eps[n/2]
				switch mode {
				case "cookie-pinned":
					r.Header["Cookie"] = []string{"theme=dark; lang=en; __coxswain_session=" + s.pins.Load().byEp[want].token}
				case "header":
					r.Header["X-Session"] = []string{"user-12345"}
					want = s.pinned(r)
				case "cookie-first":
					want = eps[0]
				}
				w := newHeaderWriter()
				b.ReportAllocs()
				for b.Loop() {
					if ep, _, _ := u.pick(w, r); ep != want {
						b.Fatalf("picked %v", ep)
					}
					delete(w.h, "Set-Cookie")
				}
			})
		}
	}
}

// BenchmarkStickySetEndpoints is the cost of an endpoint update to session persistence, off the
// request path: every endpoint new (an HMAC each), or all but one kept (their pins reused).
func BenchmarkStickySetEndpoints(b *testing.B) {
	for _, typ := range []irv1.SessionPersistence_Type{irv1.SessionPersistence_COOKIE, irv1.SessionPersistence_HEADER} {
		for _, n := range []int{10, 1000} {
			eps := testEndpoints(n + 1)
			for _, kept := range []bool{false, true} {
				b.Run(fmt.Sprintf("%s/%d/kept=%v", typ, n, kept), func(b *testing.B) {
					s := mustSticky(b, typ, "S", eps[:n])
					b.ReportAllocs()
					for i := 0; b.Loop(); i++ {
						if !kept {
							s.pins.Store(nil)
						}
						s.setEndpoints(eps[i%2 : n+i%2])
					}
				})
			}
		}
	}
}
