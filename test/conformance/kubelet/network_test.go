package kubelet

import (
	"net/netip"
	"testing"
)

func TestAllocate(t *testing.T) {
	n := &Network{Prefix: netip.MustParsePrefix("10.244.0.0/29")} // .2 to .6 for pods
	var got []string
	for range 5 {
		a, err := n.Allocate()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.String())
	}
	want := []string{"10.244.0.2", "10.244.0.3", "10.244.0.4", "10.244.0.5", "10.244.0.6"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("allocated %v, want %v", got, want)
		}
	}
	if a, err := n.Allocate(); err == nil {
		t.Fatalf("a full range allocated %s", a)
	}
	n.Release(netip.MustParseAddr("10.244.0.4"))
	n.Release(netip.MustParseAddr("10.244.0.3"))
	// Round the range: the cursor is past .6, so the next free address after it comes first.
	if a, _ := n.Allocate(); a.String() != "10.244.0.3" {
		t.Errorf("after release got %s, want 10.244.0.3", a)
	}
	if a, _ := n.Allocate(); a.String() != "10.244.0.4" {
		t.Errorf("after release got %s, want 10.244.0.4", a)
	}
	if n.gateway().String() != "10.244.0.1" {
		t.Errorf("gateway %s", n.gateway())
	}
}
