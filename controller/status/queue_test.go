package status

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
)

func routeKey(i int) Key {
	return Key{Kind: "HTTPRoute", NamespacedName: types.NamespacedName{Namespace: "apps", Name: fmt.Sprintf("r-%d", i)}}
}

// TestKeyQueue: the workqueue semantics the writer relies on: a key queued twice is written
// once, in the order first added; a key added while a worker writes it comes back once that
// worker is done (not to a second worker at the same time); a failed key comes back after the
// rate limiter's delay; ShutDown wakes a waiting worker.
func TestKeyQueue(t *testing.T) {
	q := newKeyQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[Key](time.Millisecond, time.Millisecond))
	a, b := routeKey(1), routeKey(2)
	q.Add(a)
	q.Add(b)
	q.Add(a)
	if q.Len() != 2 {
		t.Fatalf("Len %d after adding a, b, a; want 2", q.Len())
	}
	if k, _ := q.Get(); k != a {
		t.Fatalf("first Get %v, want %v", k, a)
	}
	q.Add(a) // changed again while being written
	if k, _ := q.Get(); k != b {
		t.Fatalf("second Get %v, want %v (a is active)", k, b)
	}
	if q.Len() != 0 {
		t.Fatalf("a queued for a second worker while the first writes it (Len %d)", q.Len())
	}
	q.Done(b)
	q.Done(a)
	if k, _ := q.Get(); k != a {
		t.Fatalf("after Done: Get %v, want %v again", k, a)
	}

	// A failure: back after the limiter's delay, without anyone adding it.
	q.Done(a)
	q.AddRateLimited(a)
	got := make(chan Key)
	go func() { k, _ := q.Get(); got <- k }()
	select {
	case k := <-got:
		if k != a {
			t.Fatalf("rate-limited Get %v, want %v", k, a)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a rate-limited key never came back")
	}
	q.Done(a)

	quit := make(chan bool)
	go func() { _, down := q.Get(); quit <- down }()
	q.ShutDown()
	if !<-quit {
		t.Fatal("Get after ShutDown did not quit")
	}
	q.Add(b)
	if q.Len() != 0 {
		t.Fatal("a key added after ShutDown was queued")
	}
}

// TestKeyQueueConcurrentWorkers: keys added from many goroutines while four workers take them
// are each written, and never by two workers at once.
func TestKeyQueueConcurrentWorkers(t *testing.T) {
	q := newKeyQueue(workqueue.DefaultTypedControllerRateLimiter[Key]())
	var mu sync.Mutex
	active, seen := map[Key]bool{}, map[Key]bool{}
	var workers sync.WaitGroup
	for range 4 {
		workers.Go(func() {
			for {
				k, quit := q.Get()
				if quit {
					return
				}
				mu.Lock()
				if active[k] {
					t.Errorf("%v written by two workers at once", k)
				}
				active[k], seen[k] = true, true
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				active[k] = false
				mu.Unlock()
				q.Done(k)
			}
		})
	}
	var adders sync.WaitGroup
	for g := range 4 {
		adders.Go(func() {
			for i := range 2000 {
				q.Add(routeKey(i%500 + g*100))
			}
		})
	}
	adders.Wait()
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n == 800 { // keys 0..799
			break
		}
		runtime.Gosched()
	}
	q.ShutDown()
	workers.Wait()
}

// TestKeyQueueGivesBackADrainedBacklog: after 20,000 keys queued at once (the writer's first
// Desire at 20,000 routes) are taken, the queue holds no more than a small queue does;
// client-go's workqueue kept ~3 MB of it.
func TestKeyQueueGivesBackADrainedBacklog(t *testing.T) {
	q := newKeyQueue(workqueue.DefaultTypedControllerRateLimiter[Key]())
	if held := drainedHeap(q, 20000); held > 64<<10 {
		t.Errorf("the drained queue holds %d B more than before its backlog", held)
	}
	if q.grown != 0 || q.fifo != nil {
		t.Errorf("drained: grown %d, fifo of %d", q.grown, cap(q.fifo))
	}
}

// statusQueue is what drainedHeap needs of a queue.
type statusQueue interface {
	Add(Key)
	Get() (Key, bool)
	Done(Key)
}

// drainedHeap queues n keys into q, takes them all, and reports how much more live heap there
// is than before (q itself stays reachable).
func drainedHeap(q statusQueue, n int) int64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		q.Add(routeKey(i))
	}
	for range n {
		k, _ := q.Get()
		q.Done(k)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(q)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// BenchmarkStatusQueueDrainedHeap reports the live heap a status queue keeps after a backlog of
// 20,000 keys drained: client-go's rate-limited workqueue (the writer's queue before) against
// keyQueue.
//
//	go test -run '^$' -bench StatusQueueDrainedHeap -benchtime 3x ./controller/status/
func BenchmarkStatusQueueDrainedHeap(b *testing.B) {
	queues := map[string]func() statusQueue{
		"workqueue": func() statusQueue {
			return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[Key]())
		},
		"keyQueue": func() statusQueue { return newKeyQueue(workqueue.DefaultTypedControllerRateLimiter[Key]()) },
	}
	for _, name := range []string{"workqueue", "keyQueue"} {
		b.Run(name, func(b *testing.B) {
			var held int64
			for range b.N {
				held = drainedHeap(queues[name](), 20000)
			}
			b.ReportMetric(float64(held), "B-kept")
		})
	}
}
