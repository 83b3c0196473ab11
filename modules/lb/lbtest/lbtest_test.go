package lbtest

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// recorder ("lb.test_recorder") picks the first endpoint and reports every Done on a channel.
type recorder struct {
	eps   atomic.Pointer[[]*core.Endpoint]
	picks atomic.Int64
	done  chan done
}

type done struct {
	ep     *core.Endpoint
	rtt    time.Duration
	failed bool
}

var (
	_ core.Balancer         = (*recorder)(nil)
	_ core.BalancerFeedback = (*recorder)(nil)
)

// recorders hands the test the instance the engine loads.
var recorders = make(chan *recorder, 1)

func (*recorder) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "lb.test_recorder", New: func() core.Module {
		r := &recorder{done: make(chan done, 64)}
		select {
		case recorders <- r:
		default: // the test took one already
		}
		return r
	}}
}

func (r *recorder) SetEndpoints(eps []*core.Endpoint) { r.eps.Store(&eps) }

func (r *recorder) Pick(*core.PickInfo) *core.Endpoint {
	r.picks.Add(1)
	return (*r.eps.Load())[0]
}

func (r *recorder) Done(ep *core.Endpoint, rtt time.Duration, failed bool) {
	r.done <- done{ep, rtt, failed}
}

func (r *recorder) next(t *testing.T) done {
	t.Helper()
	select {
	case d := <-r.done:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no Done from the engine")
		return done{}
	}
}

// TestFeedback: the engine calls Done once per pick, after the exchange, with its duration, and
// with failed set when the route's timeout cut it short.
func TestFeedback(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-r.Context().Done() // until the engine gives up on it
			return
		}
		time.Sleep(10 * time.Millisecond) // the latency under test
	})
	h := Options{RequestTimeout: 200 * time.Millisecond}.Start(t, &recorder{}, &irv1.ModuleConfig{Id: "lb.test_recorder"}, slow)
	rec := <-recorders

	for range 3 {
		if _, err := h.Get("/", nil); err != nil {
			t.Fatal(err)
		}
		d := rec.next(t)
		if d.failed || d.rtt < 10*time.Millisecond || d.ep != (*rec.eps.Load())[0] {
			t.Errorf("Done(%v, %v, failed=%v), want the picked endpoint, rtt ≥ 10ms, not failed", d.ep, d.rtt, d.failed)
		}
	}
	_, err := h.Get("/hang", nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != http.StatusGatewayTimeout {
		t.Fatalf("GET /hang: %v, want status 504", err)
	}
	if d := rec.next(t); !d.failed || d.rtt < 200*time.Millisecond {
		t.Errorf("timed-out exchange: Done(rtt %v, failed=%v), want failed after ≥ 200ms", d.rtt, d.failed)
	}
	if p := rec.picks.Load(); p != 4 {
		t.Errorf("%d picks for 4 requests", p)
	}
	select {
	case d := <-rec.done:
		t.Errorf("an extra Done: %+v", d)
	default:
	}
}
