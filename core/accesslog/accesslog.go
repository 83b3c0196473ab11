// Package accesslog writes the proxy's access log: one JSON line per request, layer-4 connection or
// UDP session, in the shape zap's JSON encoder gives the process log.
//
// A request's goroutine only captures its fields into a Record (values and strings the request
// and the table already hold: no allocation, no encoding) and hands it to a bounded queue. One
// goroutine of the Logger's own encodes the queued records in batches into a buffered writer and
// writes each batch with one write(2). When the sink is slower than the traffic (a slow disk, a
// blocked pipe) the queue fills and new records are dropped and counted: a request never waits
// for the log.
package accesslog

import (
	"cmp"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultQueue is how many records wait for the writer before new ones are dropped.
const DefaultQueue = 4096

// DefaultFlushInterval is how often the writer drains the queue.
const DefaultFlushInterval = 20 * time.Millisecond

// batchBytes is the writer's buffer: a busy proxy writes this much per write(2).
const batchBytes = 64 << 10

// Options configure a Logger.
type Options struct {
	// Sink receives whole lines from a single goroutine, batched: the writer wakes every
	// FlushInterval (or when the queue is half full), encodes what is queued into a 64 KiB
	// buffer and writes it, so that a busy proxy makes one write(2) and one goroutine wake-up
	// per batch rather than per request.
	Sink io.Writer
	// FlushInterval is the longest a record waits for the writer (DefaultFlushInterval when 0).
	FlushInterval time.Duration
	// Sample logs one in Sample requests (counted per Logger); 0 and 1 log every one.
	Sample uint64
	// Query keeps the query string (the query field); it is left out by default, since queries
	// carry tokens and personal data more often than paths do.
	Query bool
	// Queue bounds the records waiting for the writer (DefaultQueue when 0), rounded up to a
	// power of two.
	Queue int
	// Dropped is called (from the logging goroutine) once per record dropped because the queue
	// was full; nil: not counted.
	Dropped func()
	// Written is called by the writer with the number of lines of each batch that reached the
	// sink; nil: not counted.
	Written func(n int)
}

// Logger is an asynchronous JSON line writer. Its methods are safe for concurrent use; a nil
// *Logger logs nothing.
type Logger struct {
	sink   io.Writer
	sample uint64
	query  bool
	n      atomic.Uint64
	// queue holds the records by value in preallocated slots (ring.go): Log copies the
	// caller's Record into one, the writer encodes it there; neither side allocates or locks.
	queue *ring
	// enc and batch are the writer's: lines are encoded straight into batch, which is written
	// when nearly full and when the queue is empty (bufio would copy each line a second time).
	enc     encoder
	batch   []byte
	kick    chan struct{} // wakes the writer early when the queue is half full
	every   time.Duration
	stop    chan struct{}
	closed  atomic.Bool // stop is closed: Claim takes no more slots
	done    chan struct{}
	once    sync.Once
	dropped func()
	written func(int)
}

// New starts a Logger's writer goroutine; Close stops it.
func New(opts Options) *Logger {
	l := &Logger{
		sink:    opts.Sink,
		sample:  max(opts.Sample, 1),
		query:   opts.Query,
		queue:   newRing(cmp.Or(max(opts.Queue, 0), DefaultQueue)),
		enc:     encoder{query: opts.Query},
		batch:   make([]byte, 0, batchBytes),
		kick:    make(chan struct{}, 1),
		every:   cmp.Or(opts.FlushInterval, DefaultFlushInterval),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		dropped: opts.Dropped,
		written: opts.Written,
	}
	go l.run()
	return l
}

// Query reports whether lines keep the query string: a caller may skip capturing it otherwise.
func (l *Logger) Query() bool { return l != nil && l.query }

// Sampled reports whether the next request is to be logged: always with Sample 1, else one in
// Sample. Call it once per request, before capturing its record.
func (l *Logger) Sampled() bool {
	if l == nil {
		return false
	}
	return l.sample == 1 || l.n.Add(1)%l.sample == 0
}

// Log queues a copy of r for the writer; r may be reused once Log returns. A full queue, or a
// Logger being closed, drops it.
func (l *Logger) Log(r *Record) {
	if e := l.Claim(); e != nil {
		e.rec = *r
		l.Publish(e)
	}
}

// Entry is a queue slot claimed for one record, to be filled in place (Claim).
type Entry = slot

// Record is the entry's record, zero when claimed: the caller sets the fields of its line.
func (e *Entry) Record() *Record { return &e.rec }

// Claim takes a queue slot for one record, to be filled in place through Entry.Record and then
// handed to the writer with Publish: the request's fields go straight into the slot, where Log
// builds a Record and copies it. Nil when the record is dropped (the queue is full, counted as
// Log counts it, or the Logger is closed or nil). The caller must Publish the entry right after
// filling it, without anything between that can panic or block: the writer takes the slots in
// order, so an entry never published stops the log.
func (l *Logger) Claim() *Entry {
	if l == nil {
		return nil
	}
	if l.closed.Load() { // a load, where a select on stop was two runtime calls per record
		return nil
	}
	e := l.queue.claim()
	if e == nil && l.dropped != nil {
		l.dropped()
	}
	return e
}

// Publish hands a filled entry to the writer.
func (l *Logger) Publish(e *Entry) {
	e.publish()
	if l.queue.len() >= l.queue.cap()/2 {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func (l *Logger) run() {
	defer close(l.done)
	tick := time.NewTicker(l.every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-l.kick:
		case <-l.stop:
			l.drain()
			return
		}
		l.drain()
	}
}

// maxLine is room enough for a line: the batch is written once less than this is left (a
// longer line still fits, growing the batch).
const maxLine = 4 << 10

// drain encodes every queued record, writing whenever the batch is nearly full and once the
// queue is empty.
func (l *Logger) drain() {
	n := 0
	for {
		r := l.queue.peek()
		if r == nil {
			l.flush(n)
			return
		}
		if cap(l.batch)-len(l.batch) < maxLine {
			l.flush(n)
			n = 0
		}
		l.batch = l.enc.appendRecord(l.batch, r)
		l.queue.release()
		n++
	}
}

// flush writes the batch, n lines. A failed write loses them: nowhere to report a failing log
// sink but the log itself, and the next batch tries again.
func (l *Logger) flush(n int) {
	if len(l.batch) == 0 {
		return
	}
	_, err := l.sink.Write(l.batch)
	l.batch = l.batch[:0]
	if cap(l.batch) > 4*batchBytes { // grown by a very long line: not kept
		l.batch = make([]byte, 0, batchBytes)
	}
	if err == nil && l.written != nil {
		l.written(n)
	}
}

// Close stops taking records, writes those queued and returns; a sink blocked for good keeps
// Close waiting until done is closed (pass nil to wait for ever). Records logged after Close
// are dropped.
func (l *Logger) Close(done <-chan struct{}) {
	if l == nil {
		return
	}
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.stop)
	})
	select {
	case <-l.done:
	case <-done:
	}
}
