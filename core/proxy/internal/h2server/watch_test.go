package h2server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

type resetWatcher interface {
	WatchReset(r *http.Request, abort func()) (stop func() bool, ok bool)
}

// TestWatchReset: a watch armed on the stream's own context runs when the client resets the
// stream and reports it through stop; a watch disarmed in time never runs; a derived context
// (a deadline of the handler's own) is refused, so the caller uses context.AfterFunc on it.
func TestWatchReset(t *testing.T) {
	type report struct {
		armed, derived, stopped bool
	}
	reports := make(chan report, 4)
	fired := make(chan string, 4)
	ranWatch := make(chan struct{})
	_, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := w.(resetWatcher)
		var rep report
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		_, rep.derived = rw.WatchReset(r.WithContext(ctx), func() { fired <- "derived" })
		if r.URL.Path == "/disarm" {
			stop, ok := rw.WatchReset(r, func() { fired <- "disarmed" })
			rep.armed = ok
			rep.stopped = ok && stop()
			// A second watch on the same stream (a retried exchange) arms again.
			stop, ok = rw.WatchReset(r, func() { fired <- "second" })
			rep.armed = rep.armed && ok
			rep.stopped = rep.stopped && stop()
			reports <- rep
			return
		}
		stop, ok := rw.WatchReset(r, func() { fired <- "reset" })
		rep.armed = ok
		reports <- rep
		<-ranWatch           // the context ends first, then the watch runs (as an AfterFunc would)
		rep.stopped = stop() // false: the watch ran
		reports <- rep
	})})

	c := dialRaw(t, addr)
	requestPath(t, c, 1, "/disarm")
	if rep := <-reports; !rep.armed || !rep.stopped || rep.derived {
		t.Fatalf("disarm: %+v, want armed and stopped twice, a derived context refused", rep)
	}
	requestPath(t, c, 3, "/reset")
	if rep := <-reports; !rep.armed || rep.derived {
		t.Fatalf("reset: %+v, want armed, a derived context refused", rep)
	}
	if err := c.fr.WriteRSTStream(3, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	select {
	case what := <-fired:
		if what != "reset" {
			t.Fatalf("the %s watch ran, want the reset one", what)
		}
		close(ranWatch)
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not run on RST_STREAM")
	}
	if rep := <-reports; rep.stopped {
		t.Fatal("stop after the watch ran reported it disarmed")
	}
	select {
	case what := <-fired:
		t.Fatalf("the %s watch ran too", what)
	default:
	}
}

// requestPath sends a GET of path on stream id, ending the stream.
func requestPath(t *testing.T, c *rawClient, id uint32, path string) {
	t.Helper()
	c.hbuf.Reset()
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "example.com"}, {Name: ":path", Value: path}} {
		_ = c.henc.WriteField(f)
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}
