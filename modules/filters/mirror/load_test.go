package mirror_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/modules/filters/mirror"
)

// TestMirrorLoadP99 is issue 21's load test: the primary's p99 with and without a slow mirror,
// in the same run, must not differ by more than 10%.
//
// The two are measured interleaved, request by request: every client alternates a request to
// the mirrored route and one to the same backend without a mirror, so both see the same machine
// (a loaded 2-core VM's hiccups land on both). The mirror takes 50 ms to answer, so its 32
// workers saturate at once and most copies are dropped, as designed; each request has a 1 KiB
// body, so the tee is on the path too. The verdict is the p99 of all rounds pooled, so one
// unlucky round cannot decide it. It is skipped under -race and -short.
func TestMirrorLoadP99(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	if raceEnabled {
		// The detector multiplies every CPU cost several times over, so on a small machine the
		// test would measure the instrumented sender's CPU, not whether the primary waits.
		t.Skip("a latency measurement: run it without -race (go test -run TestMirrorLoadP99 ./modules/filters/mirror/)")
	}
	primary := newBackend(t, "primary", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	primary.got = make(chan seen) // unbuffered, never read: not recorded
	slow := newBackend(t, "slow-mirror", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond) // the slow mirror itself
	})
	slow.got = make(chan seen)
	h := start(t, primary, []*backend{slow}, options{})

	const (
		rounds    = 8
		perRound  = 4000 // requests of each kind per round
		clients   = 8
		threshold = 1.10
	)
	body := bytes.Repeat([]byte("m"), 1024)
	send := func(path string) time.Duration {
		begin := time.Now()
		resp, err := h.client.Post(h.url+path, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d", path, resp.StatusCode)
		}
		return time.Since(begin)
	}
	// Warm the connections and the sender.
	for range 200 {
		send("/plain/warm")
		send("/mirrored/warm")
	}
	var ratios []float64
	var allPlain, allMirrored []time.Duration
	for round := range rounds {
		var mu sync.Mutex
		var plain, mirrored []time.Duration
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				p := make([]time.Duration, 0, perRound/clients)
				m := make([]time.Duration, 0, perRound/clients)
				for i := range perRound / clients {
					if (i+c)%2 == 0 { // half the clients start with each kind
						p = append(p, send("/plain/x"))
						m = append(m, send("/mirrored/x"))
					} else {
						m = append(m, send("/mirrored/x"))
						p = append(p, send("/plain/x"))
					}
				}
				mu.Lock()
				plain, mirrored = append(plain, p...), append(mirrored, m...)
				mu.Unlock()
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		allPlain, allMirrored = append(allPlain, plain...), append(allMirrored, mirrored...)
		pp, mp := p99(plain), p99(mirrored)
		ratio := float64(mp) / float64(pp)
		ratios = append(ratios, ratio)
		t.Logf("round %d: p99 without mirror %v, with the slow mirror %v (ratio %.3f); p50 %v / %v",
			round, pp, mp, ratio, p50(plain), p50(mirrored))
	}
	t.Logf("mirror results: sent %v, dropped %v, failed %v", h.count(t, 0, mirror.ResultSent),
		h.count(t, 0, mirror.ResultDropped), h.count(t, 0, mirror.ResultFailed))
	if h.count(t, 0, mirror.ResultSent) == 0 || h.count(t, 0, mirror.ResultDropped) == 0 {
		t.Error("the slow mirror was not both used and saturated: the test measured nothing")
	}
	// The verdict: the p99 of every request of each kind, pooled over the rounds (the tail of
	// one round is a few dozen requests; pooled it is a few hundred).
	pp, mp := p99(allPlain), p99(allMirrored)
	ratio := float64(mp) / float64(pp)
	t.Logf("pooled: p99 without mirror %v, with the slow mirror %v: ratio %.3f (per round %.3f)", pp, mp, ratio, ratios)
	if ratio > threshold {
		t.Errorf("the slow mirror moved the primary's p99 by more than 10%%: %v → %v (ratio %.3f)", pp, mp, ratio)
	}
}

func p99(d []time.Duration) time.Duration { return quantile(d, 0.99) }
func p50(d []time.Duration) time.Duration { return quantile(d, 0.50) }

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
