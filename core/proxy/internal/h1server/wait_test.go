package h1server

import "testing"

// TestYielderFollowsWhatPays: a connection does not yield until a probe (every yieldProbe-th
// wait) finds the next request there; it then yields while yields keep paying, and stops again
// once they stop paying, so an idle or lightly loaded proxy does not pay for yields that buy
// nothing.
func TestYielderFollowsWhatPays(t *testing.T) {
	var y yielder
	wait := func(parked bool) bool {
		y.before()
		yielded := y.now
		y.after(parked)
		return yielded
	}
	for i := 1; i < yieldProbe; i++ {
		if wait(true) {
			t.Fatalf("wait %d yielded before the first probe", i)
		}
	}
	if !wait(false) {
		t.Fatalf("wait %d did not probe", yieldProbe)
	}
	for i := 0; i < 2*yieldMax; i++ {
		if !wait(false) {
			t.Fatalf("a connection whose yields pay stopped yielding after %d of them", i)
		}
	}
	if y.score != yieldMax {
		t.Fatalf("score %d, want it capped at %d", y.score, yieldMax)
	}
	misses := 0
	for wait(true) {
		misses++
	}
	if misses != yieldMax {
		t.Fatalf("stopped yielding after %d unpaid yields, want %d", misses, yieldMax)
	}
	// The wait that did not yield counted towards the next probe.
	for i := 2; i < yieldProbe; i++ {
		if wait(true) {
			t.Fatalf("wait %d after the yields stopped paying yielded", i)
		}
	}
	if !wait(true) {
		t.Fatal("no probe after the yields stopped paying")
	}
	// One yield in three paying keeps the connection yielding.
	y = yielder{score: 2}
	for i := 0; i < 30; i++ {
		if !wait(i%3 != 0) {
			t.Fatalf("stopped yielding at wait %d with one yield in three paying", i)
		}
	}
}
