package h2server

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Handlers run on reused goroutines ("workers") rather than on a new goroutine per stream.
//
// Why: a new goroutine starts with a small stack (the runtime's average goroutine stack, 2-4
// KiB here), while a proxied request's handler runs deeper than that (routing, filters, the
// upstream client encoding the request's HPACK block under its connection's lock). Each
// request then paid a stack copy (runtime.newstack/copystack, which walks and adjusts every
// frame): 15% of the proxy's CPU for gRPC at 16 calls in flight (issue 19,
// docs/performance.md). A worker keeps its grown stack from one request to the next; the
// garbage collector halves a stack that stays mostly unused, so a busy worker copies at most
// about once per GC cycle instead of once per request. grpc-go's server workers exist for the
// same reason.
//
// A stream is handed to a worker waiting for one, else to a new worker; a worker idle for
// workerIdle exits, so the workers left after a burst go away.

// workerIdle is how long a worker waits for another stream before it exits.
const workerIdle = 10 * time.Second

// job is one stream's handler call.
type job struct {
	c  *conn
	st *stream
	r  *http.Request
}

// workers hands streams to waiting workers.
type workers struct {
	work    chan job      // unbuffered: a send succeeds only when a worker is waiting
	idleFor time.Duration // workerIdle; shorter in tests
	idle    atomic.Int32  // workers waiting (tests)
	alive   atomic.Int32  // workers running or waiting (tests)
}

func newWorkers() *workers { return &workers{work: make(chan job), idleFor: workerIdle} }

// run calls the stream's handler on a waiting worker, or on a new one.
func (ws *workers) run(j job) {
	select {
	case ws.work <- j:
	default:
		ws.alive.Add(1)
		go ws.worker(j)
	}
}

// worker runs j, then the jobs handed to it, until none came for ws.idleFor.
func (ws *workers) worker(j job) {
	var timer *time.Timer
	for {
		j.c.runHandler(j.st, j.r)
		j = job{} // hold nothing of a finished request while waiting
		if timer == nil {
			timer = time.NewTimer(ws.idleFor)
		} else {
			timer.Reset(ws.idleFor)
		}
		ws.idle.Add(1)
		select {
		case j = <-ws.work:
			ws.idle.Add(-1)
			timer.Stop()
		case <-timer.C:
			ws.idle.Add(-1)
			ws.alive.Add(-1)
			return
		}
	}
}
