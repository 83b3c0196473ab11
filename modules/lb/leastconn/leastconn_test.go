package leastconn

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/lb/lbtest"
)

func load(t testing.TB) core.Balancer {
	return lbtest.Load(t, &LeastConn{}, &irv1.ModuleConfig{Id: string(ModuleID)})
}

func TestPicksLeastActive(t *testing.T) {
	cases := []struct {
		name    string
		weights []uint32
		active  []int64
		want    int
	}{
		{"fewest in flight", []uint32{1, 1, 1}, []int64{3, 1, 2}, 1},
		{"weight divides the load", []uint32{1, 4}, []int64{1, 4}, 1},       // 2/1 against 5/4
		{"heavier wins when idle", []uint32{1, 3}, []int64{0, 0}, 1},        // 1/1 against 1/3
		{"lighter wins when it is ahead", []uint32{1, 3}, []int64{0, 5}, 0}, // 1/1 against 6/3
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := load(t)
			eps := make([]*core.Endpoint, len(tc.weights))
			for i, w := range tc.weights {
				eps[i] = core.NewEndpoint("10.0.0.1", uint32(8000+i), w)
				eps[i].Active.Store(tc.active[i])
			}
			b.SetEndpoints(eps)
			for range 20 {
				if got := b.Pick(&core.PickInfo{}); got != eps[tc.want] {
					t.Fatalf("picked %s, want %s", got.HostPort, eps[tc.want].HostPort)
				}
			}
		})
	}
}

// TestTiesSpread: an idle cluster's picks are spread, not all on the first endpoint.
func TestTiesSpread(t *testing.T) {
	b := load(t)
	eps := lbtest.Endpoints(4)
	b.SetEndpoints(eps)
	seen := map[*core.Endpoint]int{}
	for range 4000 {
		seen[b.Pick(&core.PickInfo{})]++
	}
	for _, ep := range eps {
		if n := seen[ep]; n < 700 || n > 1300 {
			t.Errorf("%s picked %d of 4000 times, want about 1000", ep.HostPort, n)
		}
	}
}

// TestBalancesInFlight holds what each pick got in flight, as the engine would: the picks even out.
func TestBalancesInFlight(t *testing.T) {
	b := load(t)
	eps := lbtest.Endpoints(3)
	eps[0].Active.Store(10)
	b.SetEndpoints(eps)
	for range 29 {
		b.Pick(&core.PickInfo{}).Active.Add(1)
	}
	for _, ep := range eps {
		if a := ep.Active.Load(); a < 12 || a > 14 {
			t.Errorf("%s has %d in flight, want 13 (±1)", ep.HostPort, a)
		}
	}
}

func TestNoEndpoints(t *testing.T) {
	b := load(t)
	if ep := b.Pick(&core.PickInfo{}); ep != nil {
		t.Fatalf("Pick before SetEndpoints = %v", ep)
	}
	b.SetEndpoints(nil)
	if ep := b.Pick(&core.PickInfo{}); ep != nil {
		t.Fatalf("Pick with no endpoints = %v", ep)
	}
}

// TestConcurrentSetEndpoints runs Picks against SetEndpoints (run it with -race).
func TestConcurrentSetEndpoints(t *testing.T) {
	b := load(t)
	sets := [][]*core.Endpoint{lbtest.Endpoints(1), lbtest.Endpoints(5), nil, lbtest.Endpoints(50)}
	b.SetEndpoints(sets[0])
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ep := b.Pick(&core.PickInfo{}); ep != nil {
					ep.Active.Add(1)
					ep.Active.Add(-1)
				}
			}
		})
	}
	for i := range 2000 {
		b.SetEndpoints(sets[i%len(sets)])
	}
	close(stop)
	wg.Wait()
}

// TestEngineSlowAndFast: through the real engine, against a slow and a fast backend, the fast
// one serves the larger share of concurrent requests (its requests finish sooner, so it has
// fewer in flight whenever a pick is made).
func TestEngineSlowAndFast(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { time.Sleep(20 * time.Millisecond) })
	h := lbtest.Start(t, &LeastConn{}, &irv1.ModuleConfig{Id: string(ModuleID)}, slow, nil)
	var mu sync.Mutex
	counts := [2]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				i, err := h.Get("/", nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				counts[i]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("slow %d, fast %d", counts[0], counts[1])
	if counts[1] < 3*counts[0] {
		t.Errorf("fast backend served %d, slow %d: want the fast one at least 3 times the slow", counts[1], counts[0])
	}
}

// TestEngineCountsSurviveRebuild: a request in flight when a new table replaces the old one still
// counts against its endpoint: the next picks all go to the other, idle, endpoint.
func TestEngineCountsSurviveRebuild(t *testing.T) {
	arrived, release := make(chan int, 1), make(chan struct{})
	hold := func(i int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				arrived <- i
				<-release
			}
		})
	}
	h := lbtest.Start(t, &LeastConn{}, &irv1.ModuleConfig{Id: string(ModuleID)}, hold(0), hold(1))
	var once sync.Once
	unhold := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unhold) // before the backends close, which waits for the held request
	held := make(chan error, 1)
	go func() { _, err := h.Get("/hold", nil); held <- err }()
	busy := <-arrived
	h.Rebuild(t)
	for range 10 {
		i, err := h.Get("/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == busy {
			t.Fatalf("a pick went to backend %d, which has a request in flight from the previous table", i)
		}
	}
	unhold()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			bal := load(b)
			bal.SetEndpoints(lbtest.Endpoints(n))
			info := &core.PickInfo{}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_ = bal.Pick(info)
				}
			})
		})
	}
}

func TestRejectsUnknownConfig(t *testing.T) {
	bc := core.NewBuildContext(t.Context(), nil, core.NewRegistry(&LeastConn{}), &irv1.Snapshot{})
	defer bc.Close()
	if _, err := core.Load[core.Balancer](bc, &irv1.ModuleConfig{Id: string(ModuleID), Json: []byte(`{"x":1}`)}); err == nil {
		t.Fatal("unknown config field accepted")
	}
	if _, err := core.Load[core.Balancer](bc, &irv1.ModuleConfig{Id: string(ModuleID), Json: []byte(`{}`)}); err != nil {
		t.Fatalf("empty config: %v", err)
	}
}
