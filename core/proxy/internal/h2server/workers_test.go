package h2server

import (
	"bytes"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// goroutineID is the running goroutine's number, from its stack trace's first line.
func goroutineID() int {
	var buf [64]byte
	b := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	id, _ := strconv.Atoi(string(b[:bytes.IndexByte(b, ' ')]))
	return id
}

// awaitIdle waits until n workers wait for work.
func awaitIdle(t *testing.T, s *Server, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.workers.idle.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers idle, want %d", s.workers.idle.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Streams that follow one another run on the same goroutine, so its grown stack is not
// copied again for each; a handler that aborts (or panics) leaves its worker usable.
func TestHandlersRunOnReusedWorkers(t *testing.T) {
	ids := make(chan int, 8)
	s, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids <- goroutineID()
		switch r.URL.Path {
		case "/abort":
			panic(http.ErrAbortHandler)
		case "/panic":
			panic("handler bug")
		}
		_, _ = io.WriteString(w, "ok")
	})})
	c := h2cClient(t)
	first := -1
	for i, path := range []string{"/", "/abort", "/", "/panic", "/"} {
		res, err := c.Get("http://" + addr + path)
		if err == nil {
			_, err = io.ReadAll(res.Body)
			_ = res.Body.Close()
		}
		if (err != nil) != (path != "/") {
			t.Fatalf("GET %s: error %v", path, err)
		}
		id := <-ids
		if i == 0 {
			first = id
		} else if id != first {
			t.Fatalf("GET %s ran on goroutine %d, the first request on %d", path, id, first)
		}
		awaitIdle(t, s, 1)
	}
}

// A worker left without work exits after the idle time.
func TestIdleWorkersExit(t *testing.T) {
	s, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})})
	s.workers.idleFor = 50 * time.Millisecond
	res, err := h2cClient(t).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(res.Body)
	_ = res.Body.Close()
	if n := s.workers.alive.Load(); n != 1 {
		t.Fatalf("%d workers after one request, want 1", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.workers.alive.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still alive (%d idle)", s.workers.alive.Load(), s.workers.idle.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
