package status

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// keyQueue is the writer's work queue, with the semantics of client-go's rate-limited workqueue
// (a key is queued once however often it is added; a key added while a worker writes it is
// queued again when that worker is done; a failed key comes back after the rate limiter's
// delay), except that it gives back the memory of a large backlog once that backlog is drained.
//
// Why not client-go's: its set of queued keys is a Go map, and a Go map never shrinks. The
// writer's first Desire queues every route, so that set kept the capacity of the first drain
// for the controller's lifetime (with the FIFO's array: ~3 MB at 20,000 routes, the heap profile
// of docs/controller.md), for a queue that holds a handful of keys from then on.
type keyQueue struct {
	limiter workqueue.TypedRateLimiter[Key]

	mu   sync.Mutex
	cond sync.Cond
	// fifo are the keys waiting for a worker, each also in queued; taken from the front by
	// reslicing, so that growing it copies the waiting keys only.
	fifo []Key
	// queued are the keys added and not yet taken by a worker (waiting in fifo, or added again
	// while a worker writes them: taken up when that worker is done).
	queued map[Key]struct{}
	// active are the keys workers are writing.
	active map[Key]struct{}
	// grown is the most keys queued at once since queued was last made: when it passes
	// compactAt, queued is made afresh once it empties.
	grown    int
	shutdown bool
}

// compactAt is the backlog beyond which a drained queue makes its set afresh: a few KB, which
// the steady state (a route change queues one or two keys) never reaches.
const compactAt = 256

func newKeyQueue(limiter workqueue.TypedRateLimiter[Key]) *keyQueue {
	q := &keyQueue{limiter: limiter, queued: map[Key]struct{}{}, active: map[Key]struct{}{}}
	q.cond.L = &q.mu
	return q
}

// Add queues k, unless it is queued already.
func (q *keyQueue) Add(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutdown {
		return
	}
	if _, ok := q.queued[k]; ok {
		return
	}
	q.queued[k] = struct{}{}
	q.grown = max(q.grown, len(q.queued))
	if _, busy := q.active[k]; busy {
		return // Done queues it
	}
	q.fifo = append(q.fifo, k)
	q.cond.Signal()
}

// AddRateLimited queues k again after the rate limiter's delay for it.
func (q *keyQueue) AddRateLimited(k Key) {
	d := q.limiter.When(k)
	q.mu.Lock()
	down := q.shutdown
	q.mu.Unlock()
	if down {
		return
	}
	if d <= 0 {
		q.Add(k)
		return
	}
	time.AfterFunc(d, func() { q.Add(k) })
}

// Forget clears the rate limiter's memory of k's failures.
func (q *keyQueue) Forget(k Key) { q.limiter.Forget(k) }

// Get waits for a key and marks it active; quit is true once the queue is shut down.
func (q *keyQueue) Get() (k Key, quit bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.fifo) == 0 && !q.shutdown {
		q.cond.Wait()
	}
	if q.shutdown {
		return Key{}, true
	}
	k = q.fifo[0]
	q.fifo[0] = Key{} // its strings are free to go
	q.fifo = q.fifo[1:]
	delete(q.queued, k)
	q.active[k] = struct{}{}
	q.compact()
	return k, false
}

// Done ends a worker's write of k, queueing k again if it was added meanwhile.
func (q *keyQueue) Done(k Key) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.active, k)
	if _, again := q.queued[k]; again && !q.shutdown {
		q.fifo = append(q.fifo, k)
		q.cond.Signal()
	}
}

// compact lets the FIFO's array go once it is empty, and makes the set afresh once a large
// backlog has drained (a map keeps its largest size).
func (q *keyQueue) compact() {
	if len(q.fifo) > 0 {
		return
	}
	q.fifo = nil
	if len(q.queued) == 0 && q.grown > compactAt {
		q.queued, q.grown = map[Key]struct{}{}, 0
	}
}

// Len is the number of keys waiting for a worker.
func (q *keyQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.fifo)
}

// ShutDown wakes every waiting worker with quit; keys added afterwards are dropped.
func (q *keyQueue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.shutdown = true
	q.cond.Broadcast()
}
