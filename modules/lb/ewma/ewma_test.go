package ewma

import (
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/lb/lbtest"
)

func load(t testing.TB) *EWMA {
	b := lbtest.Load(t, &EWMA{}, &irv1.ModuleConfig{Id: string(ModuleID)})
	return b.(*EWMA)
}

func TestObserve(t *testing.T) {
	cases := []struct {
		name    string
		samples []int64
		failed  []bool
		want    int64
	}{
		{"first sample taken as it is", []int64{800}, []bool{false}, 800},
		{"alpha one eighth", []int64{800, 1600}, []bool{false, false}, 900},
		{"falls too", []int64{800, 0}, []bool{false, false}, 700},
		{"failure never lowers", []int64{800, 10}, []bool{false, true}, 800},
		{"failure raises", []int64{800, 8800}, []bool{false, true}, 1800},
		{"failure is no first sample", []int64{10}, []bool{true}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var st stat
			for i, s := range tc.samples {
				st.observe(s, tc.failed[i])
			}
			if got := st.avg.Load(); got != tc.want {
				t.Errorf("average %d, want %d", got, tc.want)
			}
		})
	}
}

func TestProbesUnsampledFirst(t *testing.T) {
	b := load(t)
	eps := lbtest.Endpoints(3)
	b.SetEndpoints(eps)
	b.Done(eps[0], time.Millisecond, false)
	b.Done(eps[1], time.Millisecond, false)
	for range 10 {
		if got := b.Pick(&core.PickInfo{}); got != eps[2] {
			t.Fatalf("picked %s, want the unsampled %s", got.HostPort, eps[2].HostPort)
		}
	}
	// Being probed, it waits behind the sampled ones.
	eps[2].Active.Add(1)
	if got := b.Pick(&core.PickInfo{}); got == eps[2] {
		t.Fatal("picked the endpoint being probed again")
	}
}

func TestPrefersFastAndIdle(t *testing.T) {
	b := load(t)
	eps := lbtest.Endpoints(2)
	b.SetEndpoints(eps)
	b.Done(eps[0], 10*time.Millisecond, false)
	b.Done(eps[1], time.Millisecond, false)
	if got := b.Pick(&core.PickInfo{}); got != eps[1] {
		t.Fatalf("picked %s, want the fast one", got.HostPort)
	}
	// Ten in flight on the fast one cost more than one slow idle endpoint: 1ms×11 > 10ms×1.
	eps[1].Active.Store(10)
	if got := b.Pick(&core.PickInfo{}); got != eps[0] {
		t.Fatalf("picked %s, want the idle slow one", got.HostPort)
	}
}

// TestKeepsAveragesAcrossSetEndpoints: the engine's in-place update hands over the endpoints it
// kept (same pointers); a weight change makes a new endpoint of the same address, which keeps
// its average too.
func TestKeepsAveragesAcrossSetEndpoints(t *testing.T) {
	b := load(t)
	eps := lbtest.Endpoints(2)
	b.SetEndpoints(eps)
	b.Done(eps[0], 3*time.Millisecond, false)
	b.Done(eps[1], 5*time.Millisecond, false)
	reweighted := core.NewEndpoint(eps[1].Address, eps[1].Port, 2)
	b.SetEndpoints([]*core.Endpoint{eps[0], reweighted, core.NewEndpoint("10.9.9.9", 80, 1)})
	s := b.state.Load()
	for i, want := range []time.Duration{3 * time.Millisecond, 5 * time.Millisecond, 0} {
		if got := time.Duration(s.stats[i].avg.Load()); got != want {
			t.Errorf("endpoint %d: average %v, want %v", i, got, want)
		}
	}
	b.Done(eps[1], time.Second, false) // no longer in the set: ignored
	if got := time.Duration(s.stats[1].avg.Load()); got != 5*time.Millisecond {
		t.Errorf("a retired endpoint's sample changed the average to %v", got)
	}
}

// TestKeepsAveragesAcrossTables: a balancer of the next table (another instance, loaded with the
// proxy's shared state) starts from the averages of the previous one; an address no balancer
// holds any more starts afresh.
func TestKeepsAveragesAcrossTables(t *testing.T) {
	store := core.NewSharedState()
	loadShared := func() (*EWMA, *core.BuildContext) {
		bc := core.NewBuildContext(t.Context(), nil, core.NewRegistry(&EWMA{}), &irv1.Snapshot{})
		bc.Shared = store
		b, err := core.Load[core.Balancer](bc, &irv1.ModuleConfig{Id: string(ModuleID)})
		if err != nil {
			t.Fatal(err)
		}
		return b.(*EWMA), bc
	}
	first, bc1 := loadShared()
	eps := lbtest.Endpoints(2)
	first.SetEndpoints(eps)
	first.Done(eps[0], 7*time.Millisecond, false)

	next, bc2 := loadShared()
	defer bc2.Close()
	rebuilt := lbtest.Endpoints(2) // a new table makes new endpoints of the same addresses
	next.SetEndpoints(rebuilt)
	if err := bc1.Close(); err != nil { // the old table retires
		t.Fatal(err)
	}
	s := next.state.Load()
	if got := time.Duration(s.stats[0].avg.Load()); got != 7*time.Millisecond {
		t.Errorf("the next table's average is %v, want the previous table's 7ms", got)
	}
	if got := s.stats[1].avg.Load(); got != 0 {
		t.Errorf("an unsampled address has average %d", got)
	}
}

// TestForgetsUnusedAddresses: the table of averages does not grow with addresses no balancer
// holds (pods that came and went).
func TestForgetsUnusedAddresses(t *testing.T) {
	b := load(t)
	for i := range 300 { // without pruning, 400 addresses
		b.SetEndpoints([]*core.Endpoint{core.NewEndpoint("10.1.0.1", uint32(i+1), 1)})
		b.SetEndpoints(lbtest.Endpoints(100)) // the set of 100 stays; the one before goes
		runtime.GC()
	}
	b.SetEndpoints(lbtest.Endpoints(100))
	if n := len(b.averages.byHP); n > 2*100+64 {
		t.Errorf("the table holds %d addresses, want at most %d", n, 2*100+64)
	}
}

func TestNoEndpoints(t *testing.T) {
	b := load(t)
	if ep := b.Pick(&core.PickInfo{}); ep != nil {
		t.Fatalf("Pick before SetEndpoints = %v", ep)
	}
	b.Done(core.NewEndpoint("10.0.0.1", 80, 1), time.Millisecond, false)
	b.SetEndpoints(nil)
	if ep := b.Pick(&core.PickInfo{}); ep != nil {
		t.Fatalf("Pick with no endpoints = %v", ep)
	}
}

// TestConcurrentSetEndpoints runs Picks and Dones against SetEndpoints (run it with -race).
func TestConcurrentSetEndpoints(t *testing.T) {
	b := load(t)
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
				if ep := b.Pick(&core.PickInfo{}); ep != nil {
					ep.Active.Add(1)
					b.Done(ep, time.Duration(g*1000+i%1000), i%7 == 0)
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

// TestEngineLatencySkew: through the real engine, with one backend slower than the other two,
// the engine's feedback steers the requests to the fast ones.
func TestEngineLatencySkew(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { time.Sleep(15 * time.Millisecond) })
	h := lbtest.Start(t, &EWMA{}, &irv1.ModuleConfig{Id: string(ModuleID)}, slow, nil, nil)
	var mu sync.Mutex
	counts := [3]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
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
	t.Logf("slow %d, fast %d and %d", counts[0], counts[1], counts[2])
	if counts[0] > 200/10 {
		t.Errorf("the slow backend served %d of 200 requests, want at most 10%%", counts[0])
	}
	if counts[1] == 0 || counts[2] == 0 {
		t.Errorf("a fast backend got nothing: %v", counts)
	}
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			bal := load(b)
			eps := lbtest.Endpoints(n)
			bal.SetEndpoints(eps)
			for i, ep := range eps {
				bal.Done(ep, time.Duration(i+1)*time.Millisecond, false)
			}
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

// BenchmarkDone is the cost the engine adds per request for this balancer's feedback.
func BenchmarkDone(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			bal := load(b)
			eps := lbtest.Endpoints(n)
			bal.SetEndpoints(eps)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					bal.Done(eps[i%n], time.Millisecond, false)
					i++
				}
			})
		})
	}
}

func TestRejectsUnknownConfig(t *testing.T) {
	bc := core.NewBuildContext(t.Context(), nil, core.NewRegistry(&EWMA{}), &irv1.Snapshot{})
	defer bc.Close()
	if _, err := core.Load[core.Balancer](bc, &irv1.ModuleConfig{Id: string(ModuleID), Json: []byte(`{"x":1}`)}); err == nil {
		t.Fatal("unknown config field accepted")
	}
	if _, err := core.Load[core.Balancer](bc, &irv1.ModuleConfig{Id: string(ModuleID), Json: []byte(`{}`)}); err != nil {
		t.Fatalf("empty config: %v", err)
	}
}
