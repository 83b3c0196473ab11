package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

type buf struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (b *buf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.b.Write(p)
}

// TestSampleAndClose logs 9 requests at 1 in 3: Close writes the 3 sampled lines, each a JSON
// object with the time, message and fields; a record logged after Close is dropped.
func TestSampleAndClose(t *testing.T) {
	var out buf
	var written int
	l := New(Options{Sink: &out, Sample: 3, Written: func(n int) { written += n }})
	at := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for i := range 9 {
		if !l.Sampled() {
			continue
		}
		l.Log(&Record{Time: at, Path: "/" + string(rune('a'+i)), Status: 200})
	}
	l.Close(nil)
	l.Log(&Record{Time: at, Path: "/late"})
	lines := bytes.Split(bytes.TrimSpace(out.b.Bytes()), []byte("\n"))
	if len(lines) != 3 || written != 3 {
		t.Fatalf("%d lines (%d counted), want 3:\n%s", len(lines), written, out.b.String())
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if m["msg"] != "request" || m["time"] != "2026-12-02T12:00:00Z" || m["path"] != "/"+string(rune('a'+3*i+2)) {
			t.Errorf("line %d: %v", i, m)
		}
	}
}

// TestNilLogger: a nil *Logger logs nothing and never panics.
func TestNilLogger(t *testing.T) {
	var l *Logger
	if l.Sampled() || l.Query() {
		t.Fatal("a nil logger samples")
	}
	l.Close(nil)
}

// TestFullQueueDrops fills the queue of a logger whose writer is stuck in a blocked sink: every
// record beyond what the queue (and the batch the writer holds) takes is dropped and counted, and
// once the sink is released the rest are written.
func TestFullQueueDrops(t *testing.T) {
	release := make(chan struct{})
	sink := blockedWriter{release: release, entered: make(chan struct{}, 1)}
	var dropped int
	var mu sync.Mutex
	var written int
	l := New(Options{Sink: sink, Queue: 4, FlushInterval: time.Millisecond, Dropped: func() { dropped++ },
		Written: func(n int) { mu.Lock(); written += n; mu.Unlock() }})
	l.Log(&Record{Path: "/first"})
	<-sink.entered // the writer holds /first and is blocked writing it
	for range 10 {
		l.Log(&Record{Path: "/queued"})
	}
	if dropped != 6 {
		t.Errorf("%d dropped, want 6 (10 logged into a queue of 4)", dropped)
	}
	close(release)
	l.Close(nil)
	mu.Lock()
	defer mu.Unlock()
	if written != 5 {
		t.Errorf("%d written, want 5", written)
	}
}

type blockedWriter struct {
	release <-chan struct{}
	entered chan struct{}
}

func (w blockedWriter) Write(p []byte) (int, error) {
	select {
	case w.entered <- struct{}{}:
	default:
	}
	<-w.release
	return len(p), nil
}

// TestManyLoggers: lines logged by many goroutines at once while the writer drains come out
// whole (never interleaved), once each, and each goroutine's in its order (run under -race:
// the lock is what orders a line's copy and its write).
func TestManyLoggers(t *testing.T) {
	const goroutines, each = 8, 2000
	var out buf
	l := New(Options{Sink: &out, Queue: goroutines * each, FlushInterval: time.Millisecond})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				l.Log(&Record{Path: "/" + strconv.Itoa(g) + "/" + strconv.Itoa(i), Status: 200})
			}
		})
	}
	wg.Wait()
	l.Close(nil)
	next := make([]int, goroutines)
	n := 0
	for line := range bytes.Lines(out.b.Bytes()) {
		var m struct{ Path string }
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		var g, i int
		if _, err := fmt.Sscanf(m.Path, "/%d/%d", &g, &i); err != nil || g < 0 || g >= goroutines || i != next[g] {
			t.Fatalf("line %d: path %q, want goroutine %d's line %d next", n, m.Path, g, next[g])
		}
		next[g]++
		n++
	}
	if n != goroutines*each {
		t.Fatalf("%d lines, want %d", n, goroutines*each)
	}
}

// TestTimeCache: the cached second is reused only for its own second and location: lines of
// the same second with other nanoseconds (none, trailing zeros), of the next second, and of the
// same instant in other zones are each what time.RFC3339Nano writes.
func TestTimeCache(t *testing.T) {
	base := time.Date(2026, 12, 6, 7, 6, 21, 0, time.UTC)
	east, west := time.FixedZone("east", 5*3600+30*60), time.FixedZone("west", -7*3600)
	var clock stampCache
	for _, at := range []time.Time{
		base, base.Add(1), base.Add(120 * time.Millisecond), base.Add(999999999), base.Add(10 * time.Microsecond),
		base.In(east), base.Add(5).In(east), base.In(west), base.Add(time.Second), base,
		base.Add(time.Second - 1).In(time.Local), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 0, west),
	} {
		if got, want := string(clock.appendTime(nil, at)), at.Format(time.RFC3339Nano); got != want {
			t.Errorf("%v: got %s, want %s", at, got, want)
		}
	}
}

// TestBatchedWrites: lines queued together reach the sink in one write.
func TestBatchedWrites(t *testing.T) {
	var out buf
	l := New(Options{Sink: &out, FlushInterval: time.Hour}) // only Close drains
	for range 100 {
		l.Log(&Record{Path: "/x", Status: 200})
	}
	l.Close(nil)
	if n := bytes.Count(out.b.Bytes(), []byte("\n")); n != 100 || out.writes != 1 {
		t.Errorf("%d lines in %d writes, want 100 in 1", n, out.writes)
	}
}

// zapLine is what zap's JSON encoder, configured as the process log's, writes for r: the
// reference appendRecord must match byte for byte.
func zapLine(t testing.TB, r *Record, query bool) string {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		TimeKey: "time", MessageKey: "msg", EncodeTime: zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.SecondsDurationEncoder, LineEnding: "\n",
	})
	var fs []zapcore.Field
	str := func(k, v string) {
		if v != "" {
			fs = append(fs, zap.String(k, v))
		}
	}
	str("listener", r.Listener)
	str("gateway", r.Gateway)
	str("route", r.Route)
	str("rule", r.Rule)
	str("backend", r.Backend)
	str("upstream", r.Upstream)
	if r.Mirror {
		fs = append(fs, zap.Bool("mirror", true))
	}
	if r.Kind == KindRequest {
		str("method", r.Method)
		str("host", r.Host)
		str("path", r.Path)
		if query {
			str("query", r.Query)
		}
		str("protocol", r.Protocol)
		if r.Status != 0 {
			fs = append(fs, zap.Int("status", r.Status))
		}
		if r.Aborted {
			fs = append(fs, zap.Bool("aborted", true))
		}
	}
	fs = append(fs, zap.Int64("bytes_in", r.BytesIn), zap.Int64("bytes_out", r.BytesOut), zap.Duration("duration", r.Duration))
	if r.Kind == KindRequest && r.Upstream != "" {
		fs = append(fs, zap.Duration("upstream_duration", r.UpstreamDuration))
	}
	if r.ClientIP.IsValid() {
		fs = append(fs, zap.String("client_ip", r.ClientIP.String()))
	}
	if r.PeerIP.IsValid() {
		fs = append(fs, zap.String("peer_ip", r.PeerIP.String()))
	}
	str("tls_sni", r.TLSSNI)
	str("request_id", r.RequestID)
	str("error", r.Error)
	b, err := enc.EncodeEntry(zapcore.Entry{Time: r.Time, Message: kindMessages[r.Kind]}, fs)
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestLineIsZapJSON: appendRecord writes what zap's encoder writes, for every kind of record and
// for strings that need escaping (quotes, backslashes, control characters, invalid UTF-8, valid
// multi-byte text), so the access log reads like the process log and parses as JSON.
func TestLineIsZapJSON(t *testing.T) {
	at := time.Date(2026, 12, 2, 12, 47, 11, 850449544, time.UTC)
	full := Record{Kind: KindRequest, Time: at, Listener: "127.0.0.1:8080/HTTP", Gateway: "default/quickstart",
		Route: "HTTPRoute/default/app/rule/0/match/0", Rule: "api", Backend: "default/app-v1:80", Upstream: "127.0.0.1:9001",
		Method: "GET", Host: "127.0.0.1:8080", Path: "/app/hello", Query: "user=42", Protocol: "HTTP/1.1", Status: 200,
		BytesOut: 333, Duration: 814513 * time.Nanosecond, UpstreamDuration: 801001 * time.Nanosecond,
		ClientIP: netip.MustParseAddr("203.0.113.7"), PeerIP: netip.MustParseAddr("127.0.0.1"), TLSSNI: "app.example.com", RequestID: "7f3c"}
	cases := map[string]Record{
		"full":       full,
		"minimal":    {Time: at},
		"aborted":    {Time: at, Status: 200, Aborted: true, Upstream: "10.0.0.1:80"},
		"mirror":     {Time: at, Mirror: true, Route: "r", Backend: "b", Method: "POST", Error: `dial tcp: "refused"`},
		"connection": {Kind: KindConnection, Time: at, Listener: "l", Route: "TCPRoute/ns/t/rule/0/match/0", Upstream: "10.0.0.2:5432", BytesIn: 10, BytesOut: 20, Duration: time.Second, ClientIP: netip.MustParseAddr("::1"), TLSSNI: "db"},
		"session":    {Kind: KindSession, Time: at, Route: "UDPRoute/ns/u/rule/0/match/0", BytesIn: 1, Duration: 1500 * time.Millisecond, ClientIP: netip.MustParseAddr("fe80::1%eth0")},
		"escapes":    {Time: at, Path: "/a\"b\\c\n\r\t\x00\x1f\x7f", Host: "h\xffx\xc3", RequestID: "ünïcödé ✓ 😀", Method: "\u2028"},
		"zoned":      {Time: at, ClientIP: netip.MustParseAddr("fe80::1%we\"ird\\zone"), PeerIP: netip.MustParseAddr("fe80::2%\x01")},
		"local time": {Time: time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", -5*3600)), Duration: -time.Millisecond},
	}
	// Shared: the cases hit and miss its cached second and its origins.
	encoders := map[bool]*encoder{false: {}, true: {query: true}}
	for name, r := range cases {
		for _, query := range []bool{false, true} {
			got := string(encoders[query].appendRecord(nil, &r))
			if want := zapLine(t, &r, query); got != want {
				t.Errorf("%s (query %t):\n got %s\nwant %s", name, query, got, want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("%s: not JSON: %s", name, got)
			}
		}
	}
}

// TestLineIsZapJSONRandom holds appendRecord to zap's output on random strings of random bytes
// (half of them ASCII-heavy, half arbitrary).
func TestLineIsZapJSONRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randString := func() string {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			if rng.IntN(2) == 0 {
				b[i] = byte(0x20 + rng.IntN(0x5f))
			} else {
				b[i] = byte(rng.IntN(256))
			}
		}
		return string(b)
	}
	// The fields a route's requests share take their values from a few strings, as a table's
	// are: the encoder's origin cache meets the same strings again (and strings of the same
	// length), in the same and in other combinations.
	shared := make([]string, 6)
	for i := range shared {
		shared[i] = randString()
	}
	whole := "ns/gw/http" // and prefixes of it: the same address, other lengths
	shared = append(shared, "plain", "plaim", whole, whole[:5], whole[:0], `quo"te`)
	pick := func() string { return shared[rng.IntN(len(shared))] }
	// And the client and peer addresses from a few, as a connection's requests repeat them.
	addrs := []netip.Addr{{}, netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.1"),
		netip.MustParseAddr("::1"), netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("fe80::1%eth1")}
	pickAddr := func() netip.Addr { return addrs[rng.IntN(len(addrs))] }
	var enc encoder
	for range 2000 {
		r := Record{Time: time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC(), Path: randString(), Host: randString(),
			RequestID: randString(), Status: rng.IntN(600), Duration: time.Duration(rng.Int64N(1e11)),
			Listener: pick(), Gateway: pick(), Route: pick(), Rule: pick(), Backend: pick(), Upstream: pick(),
			ClientIP: pickAddr(), PeerIP: pickAddr()}
		if got, want := string(enc.appendRecord(nil, &r)), zapLine(t, &r, false); got != want {
			t.Fatalf("\n got %q\nwant %q", got, want)
		}
	}
}

// FuzzLineIsZapJSON is TestLineIsZapJSONRandom driven by the fuzzer, durations and the time's
// nanoseconds too.
func FuzzLineIsZapJSON(f *testing.F) {
	f.Add("/a\"b", "h\xff", "id\n", int64(814513), int64(1))
	f.Add("", "", "", int64(-1e15), int64(0))
	f.Fuzz(func(t *testing.T, path, host, id string, d, ns int64) {
		r := Record{Time: time.Unix(1, ns).UTC(), Path: path, Host: host, RequestID: id, Duration: time.Duration(d)}
		if got, want := string(new(encoder).appendRecord(nil, &r)), zapLine(t, &r, false); got != want {
			t.Fatalf("\n got %q\nwant %q", got, want)
		}
	})
}

// BenchmarkLog is the request goroutine's share of a line, all of the access log's per-request
// cost but the writer's write(2): encoding the record and copying the line into the queue. The
// writer drains into io.Discard meanwhile.
func BenchmarkLog(b *testing.B) {
	l := New(Options{Sink: io.Discard, Queue: 1 << 16, FlushInterval: time.Millisecond})
	defer l.Close(nil)
	r := benchRecord()
	b.ReportAllocs()
	before := processCPU(b)
	for b.Loop() {
		l.Log(&r)
	}
	l.Close(nil) // the writer's last batch counts too
	b.ReportMetric(float64(processCPU(b)-before)/float64(b.N), "cpu-ns/op")
}

// processCPU is the process's user and system CPU time so far: on a loaded machine a
// benchmark's ns/op is mostly waiting for a CPU, its CPU time per operation much less so.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLogParallel is BenchmarkLog from every P at once: the ring's producers contending,
// as a proxy's request goroutines log.
func BenchmarkLogParallel(b *testing.B) {
	l := New(Options{Sink: io.Discard, Queue: 1 << 16, FlushInterval: time.Millisecond})
	defer l.Close(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := benchRecord()
		for pb.Next() {
			l.Log(&r)
		}
	})
}

// BenchmarkEncode is encoding one line, the time from the cached second.
func BenchmarkEncode(b *testing.B) {
	r := benchRecord()
	var enc encoder
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	before := processCPU(b)
	for b.Loop() {
		buf = enc.appendRecord(buf[:0], &r)
	}
	b.ReportMetric(float64(processCPU(b)-before)/float64(b.N), "cpu-ns/op")
}

// BenchmarkEncodeZap is the same line through zap's encoder, for comparison.
func BenchmarkEncodeZap(b *testing.B) {
	r := benchRecord()
	b.ReportAllocs()
	for b.Loop() {
		_ = zapLine(b, &r, false)
	}
}

func benchRecord() Record {
	return Record{Kind: KindRequest, Time: time.Now(), Listener: "127.0.0.1:8080/HTTP", Gateway: "default/quickstart",
		Route: "HTTPRoute/default/app/rule/0/match/0", Backend: "default/app-v1:80", Upstream: "127.0.0.1:9001",
		Method: "GET", Host: "127.0.0.1:8080", Path: "/app/hello", Protocol: "HTTP/1.1", Status: 200,
		BytesOut: 333, Duration: 814513, UpstreamDuration: 801001, ClientIP: netip.MustParseAddr("127.0.0.1"), RequestID: "7f3c"}
}

// BenchmarkLogWritten is a line's whole cost, both sides: the logging goroutine's and the
// writer's, per line that reached the sink (batches of 512 lines, each drained before the next,
// so none is dropped); cpu-ns/op is the process's CPU time per line.
func BenchmarkLogWritten(b *testing.B) {
	var written atomic.Int64
	l := New(Options{Sink: io.Discard, FlushInterval: time.Millisecond, Written: func(n int) { written.Add(int64(n)) }})
	r := benchRecord()
	b.ReportAllocs()
	before := processCPU(b)
	logged := int64(0)
	for b.Loop() {
		l.Log(&r)
		if logged++; logged%512 == 0 {
			for written.Load() < logged {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	l.Close(nil)
	if written.Load() != logged {
		b.Fatalf("%d lines written of %d", written.Load(), logged)
	}
	b.ReportMetric(float64(processCPU(b)-before)/float64(b.N), "cpu-ns/op")
}

// TestClaimFillsInPlace logs through Claim and Publish: each line carries what was written into
// its entry, and a closed Logger claims nothing.
func TestClaimFillsInPlace(t *testing.T) {
	var buf bytes.Buffer
	l := New(Options{Sink: &buf})
	for _, p := range []string{"/a", "/b"} {
		e := l.Claim()
		if e == nil {
			t.Fatal("Claim on an empty queue returned nil")
		}
		r := e.Record()
		if *r != (Record{}) {
			t.Fatalf("claimed record is not zero: %+v", *r)
		}
		r.Path, r.Status = p, 200
		l.Publish(e)
	}
	l.Close(nil) // writes what is queued; the writer is done with buf after it
	var paths []string
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		paths = append(paths, m["path"].(string))
	}
	if want := []string{"/a", "/b"}; !slices.Equal(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
	if l.Claim() != nil {
		t.Error("Claim on a closed Logger returned an entry")
	}
}
