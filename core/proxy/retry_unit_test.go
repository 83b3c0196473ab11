package proxy

import (
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

func TestRetryPolicyCodes(t *testing.T) {
	p := newRetryPolicy(&irv1.Retry{Codes: []uint32{400, 463, 464, 503, 599, 600, 200}, Attempts: 1}, nil)
	for code, want := range map[int]bool{
		399: false, 400: true, 401: false, 463: true, 464: true, 500: false,
		503: true, 598: false, 599: true, 600: false, 200: false,
	} {
		if got := p.retriesStatus(code); got != want {
			t.Errorf("retriesStatus(%d) = %v, want %v", code, got, want)
		}
	}
	if newRetryPolicy(&irv1.Retry{Codes: []uint32{503}}, nil) != nil {
		t.Error("attempts 0 made a policy; it must retry nothing")
	}
}

// The n-th retry waits between half and all of base·2^(n-1), capped at maxBackoffFactor·base.
func TestRetryPolicyDelay(t *testing.T) {
	p := newRetryPolicy(&irv1.Retry{Attempts: 10, BackoffMs: 100}, nil)
	for n, full := range map[int]time.Duration{1: 100, 2: 200, 3: 400, 4: 800, 5: 1000, 9: 1000} {
		full *= time.Millisecond
		for range 50 {
			if d := p.delay(n); d < full/2 || d > full {
				t.Fatalf("delay(%d) = %v, want within [%v, %v]", n, d, full/2, full)
			}
		}
	}
	if d := newRetryPolicy(&irv1.Retry{Attempts: 1}, nil).delay(1); d < defaultBackoff/2 || d > defaultBackoff {
		t.Errorf("default delay(1) = %v, want within [%v, %v]", d, defaultBackoff/2, defaultBackoff)
	}
}
