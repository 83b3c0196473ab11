// Package accesslog writes the proxy's access log: one JSON line per request, layer-4 connection or
// UDP session, encoded by zap's JSON encoder on the request's goroutine into a pooled buffer and
// written by one goroutine of its own. The hand-off is a bounded queue: when the sink is slower
// than the traffic (a slow disk, a blocked pipe) lines are dropped and counted, and a request never
// waits for the log.
package accesslog

import (
	"bufio"
	"cmp"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// DefaultQueue is how many encoded lines wait for the writer before new ones are dropped.
const DefaultQueue = 4096

// DefaultFlushInterval is how often the writer drains the queue.
const DefaultFlushInterval = 20 * time.Millisecond

// Options configure a Logger.
type Options struct {
	// Sink receives whole lines from a single goroutine, batched: the writer wakes every
	// FlushInterval (or when the queue is half full), drains the queue into a 64 KiB buffer and
	// writes it, so that a busy proxy makes one write(2) and one goroutine wake-up per batch
	// rather than per request.
	Sink io.Writer
	// FlushInterval is the longest a line waits for the writer (DefaultFlushInterval when 0).
	FlushInterval time.Duration
	// Sample logs one in Sample requests (counted per Logger); 0 and 1 log every one.
	Sample uint64
	// Query keeps the query string in the path field; it is cut off by default, since queries
	// carry tokens and personal data more often than paths do.
	Query bool
	// Queue bounds the lines waiting for the writer (DefaultQueue when 0).
	Queue int
	// Dropped is called (from the request's goroutine) once per line dropped because the queue was
	// full; nil: not counted.
	Dropped func()
	// Written is called by the writer after each line reaches the sink; nil: not counted.
	Written func()
}

// Logger is an asynchronous JSON line writer. Its methods are safe for concurrent use; a nil
// *Logger logs nothing.
type Logger struct {
	enc     zapcore.Encoder
	sink    *bufio.Writer
	sample  uint64
	query   bool
	n       atomic.Uint64
	queue   chan *buffer.Buffer
	kick    chan struct{} // wakes the writer early when the queue is half full
	every   time.Duration
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	dropped func()
	written func()
	fields  sync.Pool // *Fields
}

// New starts a Logger's writer goroutine; Close stops it.
func New(opts Options) *Logger {
	q := opts.Queue
	if q <= 0 {
		q = DefaultQueue
	}
	l := &Logger{
		enc: zapcore.NewJSONEncoder(zapcore.EncoderConfig{
			TimeKey:        "time",
			MessageKey:     "msg",
			EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
			EncodeDuration: zapcore.SecondsDurationEncoder,
			LineEnding:     "\n",
		}),
		sink:    bufio.NewWriterSize(opts.Sink, 64<<10),
		sample:  max(opts.Sample, 1),
		query:   opts.Query,
		queue:   make(chan *buffer.Buffer, q),
		kick:    make(chan struct{}, 1),
		every:   cmp.Or(opts.FlushInterval, DefaultFlushInterval),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		dropped: opts.Dropped,
		written: opts.Written,
	}
	l.fields.New = func() any { return &Fields{f: make([]zapcore.Field, 0, 24)} }
	go l.run()
	return l
}

// Query reports whether paths keep their query string.
func (l *Logger) Query() bool { return l != nil && l.query }

// Sampled reports whether the next request is to be logged: always with Sample 1, else one in
// Sample. Call it once per request, before building its line.
func (l *Logger) Sampled() bool {
	if l == nil {
		return false
	}
	return l.sample == 1 || l.n.Add(1)%l.sample == 0
}

// Fields is a reusable list of a line's fields, from Get, handed back by Write.
type Fields struct {
	f       []zapcore.Field
	scratch [64]byte // an IP address's text (IP)
}

// Add appends a field.
func (fs *Fields) Add(f zapcore.Field) { fs.f = append(fs.f, f) }

// Get returns an empty field list to fill and pass to Write.
func (l *Logger) Get() *Fields {
	fs := l.fields.Get().(*Fields)
	fs.f = fs.f[:0]
	return fs
}

// Write encodes one line (msg, the time t and fs) and queues it; fs goes back to the pool, and the
// strings in it may be reused by the caller once Write returns. A full queue drops the line.
func (l *Logger) Write(t time.Time, msg string, fs *Fields) {
	b, err := l.enc.EncodeEntry(zapcore.Entry{Time: t, Message: msg}, fs.f)
	clear(fs.f) // no strings of a finished request kept alive by the pool
	fs.f = fs.f[:0]
	l.fields.Put(fs)
	if err != nil {
		return // the encoder fails only on fields no caller here builds (a marshaler's error)
	}
	select {
	case <-l.stop:
		b.Free()
		return
	default:
	}
	select {
	case l.queue <- b:
		if len(l.queue) >= cap(l.queue)/2 {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
	default:
		b.Free()
		if l.dropped != nil {
			l.dropped()
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

// drain writes every queued line and flushes them.
func (l *Logger) drain() {
	for {
		select {
		case b := <-l.queue:
			l.emit(b)
		default:
			_ = l.sink.Flush()
			return
		}
	}
}

func (l *Logger) emit(b *buffer.Buffer) {
	_, _ = l.sink.Write(b.Bytes()) // nowhere to report a failing log sink but the log itself
	b.Free()
	if l.written != nil {
		l.written()
	}
}

// Close stops taking lines, writes those queued and returns; a sink blocked for good keeps Close
// waiting until done is closed (pass nil to wait for ever). Lines written after Close are dropped.
func (l *Logger) Close(done <-chan struct{}) {
	if l == nil {
		return
	}
	l.once.Do(func() { close(l.stop) })
	select {
	case <-l.done:
	case <-done:
	}
}

// IP appends the field key with the address a in text form, formatted into the list's own
// scratch space (no allocation); an invalid address is left out. Call it at most once per line.
func (fs *Fields) IP(key string, a netip.Addr) {
	if !a.IsValid() {
		return
	}
	b := a.AppendTo(fs.scratch[:0])
	fs.f = append(fs.f, zapcore.Field{Key: key, Type: zapcore.StringType, String: unsafe.String(unsafe.SliceData(b), len(b))})
}
