package controller

import (
	"context"
	"testing"
	"time"
)

func TestCoalescerMergesABurst(t *testing.T) {
	c := newCoalescer(20*time.Millisecond, time.Second)
	for range 100 {
		c.Notify()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// The whole burst was one wake-up: nothing is left pending.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if err := c.Wait(short); err == nil {
		t.Fatal("a second wake-up for the same burst")
	}
}

// A steady stream of notifications must not postpone the wake-up past maxDelay.
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
	if err := c.Wait(ctx); err != nil {
		t.Fatalf("Wait did not return before the test deadline despite maxDelay: %v", err)
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
