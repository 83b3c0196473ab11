package controller

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// The first change after a quiet spell is translated at once, whatever the holdoff.
func TestCoalescerLeadingEdge(t *testing.T) {
	c := newCoalescer(time.Hour, time.Hour)
	c.Notify()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		t.Fatalf("the first change waited: %v", err)
	}
}

// A change right after a wake-up is held back for the gap, and the changes that arrive meanwhile
// are one wake-up.
func TestCoalescerHoldsABurst(t *testing.T) {
	c := newCoalescer(time.Hour, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Notify()
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		c.Notify()
	}
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := c.Wait(short); err == nil {
		t.Fatal("a change right after a wake-up was not held back")
	}
}

// The gap doubles for every wake-up that had to wait for it while changes kept coming, up to
// maxDelay, and a quiet spell resets it.
func TestCoalescerGapGrowsWithRate(t *testing.T) {
	// Gaps of tens of milliseconds, not single ones: the notifier must run within each gap and
	// the test goroutine must call Wait again within twice the gap, which a loaded machine under
	// -race did not always grant at 1 ms (seen once at load ~8).
	const unit = 20 * time.Millisecond
	c := newCoalescer(unit, 8*unit)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // changes faster than any gap
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				c.Notify()
				runtime.Gosched()
			}
		}
	}()
	var gaps []time.Duration
	for range 6 {
		gaps = append(gaps, c.gap())
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
	want := []time.Duration{1, 1, 2, 4, 8, 8}
	for i, w := range want {
		if gaps[i] != w*unit {
			t.Fatalf("gaps %v, want %v times 1 1 2 4 8 8", gaps, unit)
		}
	}
	c.last = time.Now().Add(-time.Hour) // a quiet spell
	c.Notify()
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.gap(); got != unit {
		t.Fatalf("after a quiet spell the gap is %v, want %v", got, unit)
	}
}

// Changes that come one at a time, each right after the previous wake-up (a client waiting for
// its change to be served before the next), bring a grown gap back down: every wait that gathered
// nothing else halves it.
func TestCoalescerSequentialChangesShrinkTheGap(t *testing.T) {
	c := newCoalescer(time.Millisecond, time.Hour)
	c.step = 5 // as after a burst: a gap of 32ms
	c.last = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var gaps []time.Duration
	for range 6 {
		c.Notify()
		if err := c.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		gaps = append(gaps, c.gap())
	}
	// 16, 8, 4, 2, 1, 1 ms; a descheduled test may see a quiet spell (a reset) instead of a
	// halving, never a gap that stays or grows.
	for i := 1; i < len(gaps); i++ {
		if gaps[i] > gaps[i-1] {
			t.Fatalf("gaps %v grew", gaps)
		}
	}
	if gaps[0] > 16*time.Millisecond || gaps[len(gaps)-1] != time.Millisecond {
		t.Fatalf("gaps %v, want 16ms 8ms 4ms 2ms 1ms 1ms", gaps)
	}
}

// A steady stream of notifications must not postpone a wake-up past maxDelay.
func TestCoalescerMaxDelay(t *testing.T) {
	c := newCoalescer(time.Hour, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				c.Notify()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for range 3 {
		if err := c.Wait(ctx); err != nil {
			t.Fatalf("Wait did not return before the test deadline despite maxDelay: %v", err)
		}
	}
}

func TestCoalescerWaitEndsWithContext(t *testing.T) {
	c := newCoalescer(time.Millisecond, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Wait(ctx); err == nil {
		t.Fatal("Wait returned nil on a cancelled context")
	}
}

func TestParseAddresses(t *testing.T) {
	tests := []struct {
		in       string
		wantType string
		want     string
		wantErr  bool
	}{
		{in: "10.99.0.1", wantType: "IPAddress", want: "10.99.0.1"},
		{in: "2001:db8::1", wantType: "IPAddress", want: "2001:db8::1"},
		{in: "gateway.example.com", wantType: "Hostname", want: "gateway.example.com"},
		{in: "not a host!", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseAddresses([]string{tc.in})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error for %q", tc.in)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(*got[0].Type) != tc.wantType || got[0].Value != tc.want {
				t.Fatalf("got %s %q, want %s %q", *got[0].Type, got[0].Value, tc.wantType, tc.want)
			}
		})
	}
}
