package proxy_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// TestRequestDurationObserved: an HTTP/1.1 request to a backend that takes 30 ms is observed
// in the duration histogram from its arrival to the end of its handler (the server's reading of
// the arrival, the handler's of the end, Writer.Ended): once, above the 25 ms boundary, with
// its time in the sum; a second request on the same connection is timed afresh.
func TestRequestDurationObserved(t *testing.T) {
	const wait = 30 * time.Millisecond
	be := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(wait) // the upstream's time is what the histogram must see
		_, _ = io.WriteString(w, "ok")
	})
	o := newObservedProxy(t, true, nil)
	srv := server("", vhost("example.com", route("httproute/ns/slow/rule/0/match/0", "/", backend("slow", 1))))
	srv.Sources = []string{"ns/gw/http"}
	l := httpListener(0, srv)
	apply(t, o.p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("slow", be)}))
	addr := addrOf(t, o.p, l.Name)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for range 2 {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		req.Host = "example.com"
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	families, err := o.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "coxswain_proxy_request_duration_seconds" {
			continue
		}
		if len(mf.GetMetric()) != 1 {
			t.Fatalf("%d duration series, want 1", len(mf.GetMetric()))
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 2 {
			t.Errorf("count %d, want 2", h.GetSampleCount())
		}
		if h.GetSampleSum() < 2*wait.Seconds() || h.GetSampleSum() > 60 {
			t.Errorf("sum %v s, want at least %v s (and not a wall-clock epoch)", h.GetSampleSum(), 2*wait.Seconds())
		}
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() < wait.Seconds() && b.GetCumulativeCount() != 0 {
				t.Errorf("bucket le=%v holds %d requests that took at least %v", b.GetUpperBound(), b.GetCumulativeCount(), wait)
			}
		}
		return
	}
	t.Fatal("no duration histogram exported")
}
