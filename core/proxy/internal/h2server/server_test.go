package h2server

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// serve runs a Server on a loopback listener until the test ends and returns its address.
func serve(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.ServeConn(nc, nil) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		_ = s.Close()
		wg.Wait()
	})
	return s, ln.Addr().String()
}

// h2cClient speaks HTTP/2 with prior knowledge over cleartext (net/http's client).
func h2cClient(t *testing.T) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-Proto", r.Proto)
		w.Header().Set("X-Host", r.Host)
		w.Header().Set("X-Path", r.URL.RequestURI())
		w.Header().Set("X-Cookie", r.Header.Get("Cookie"))
		w.Header().Set("Trailer", "X-Declared")
		n, err := io.Copy(w, r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		w.Header().Set("X-Declared", "yes")
		w.Header().Set(http.TrailerPrefix+"X-Len", itoa(n))
		if r.Trailer != nil {
			w.Header().Set(http.TrailerPrefix+"X-Req-Trailer", r.Trailer.Get("X-Up"))
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestRequestResponseAndTrailers(t *testing.T) {
	_, addr := serve(t, Config{Handler: echo()})
	c := h2cClient(t)
	cases := []struct {
		name string
		size int
	}{{"empty", 0}, {"small", 12}, {"buffered", 10 << 10}, {"beyond the windows", 3 << 20}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Repeat([]byte("abcdefgh"), tc.size/8+1)[:tc.size]
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/p?q=1", bytes.NewReader(body))
			req.Header.Add("Cookie", "a=1")
			req.Header.Add("Cookie", "b=2")
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("body: got %d bytes, want %d", len(got), len(body))
			}
			if res.ProtoMajor != 2 || res.Header.Get("X-Proto") != "HTTP/2.0" || res.Header.Get("X-Path") != "/p?q=1" ||
				res.Header.Get("X-Host") != addr || res.Header.Get("X-Cookie") != "a=1; b=2" {
				t.Fatalf("header: %v", res.Header)
			}
			if res.Trailer.Get("X-Declared") != "yes" || res.Trailer.Get("X-Len") != itoa(int64(tc.size)) {
				t.Fatalf("trailers: %v", res.Trailer)
			}
		})
	}
}

// trailerBody sends its trailer after the body (x/net's client reads req.Trailer at EOF).
type trailerBody struct {
	r   io.Reader
	req *http.Request
}

func (b *trailerBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.req.Trailer.Set("X-Up", "sent")
	}
	return n, err
}

func TestRequestTrailers(t *testing.T) {
	_, addr := serve(t, Config{Handler: echo()})
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", nil)
	req.Trailer = http.Header{"X-Up": nil}
	req.Body = io.NopCloser(&trailerBody{r: strings.NewReader("body"), req: req})
	req.ContentLength = -1
	res, err := h2cClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(res.Body)
	_ = res.Body.Close()
	if got := res.Trailer.Get("X-Req-Trailer"); got != "sent" {
		t.Fatalf("request trailer seen by the handler: %q", got)
	}
}

func TestConcurrentStreams(t *testing.T) {
	_, addr := serve(t, Config{Handler: echo()})
	c := h2cClient(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := strings.Repeat("x", i*1000)
			res, err := c.Post("http://"+addr+"/", "text/plain", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			got, err := io.ReadAll(res.Body)
			_ = res.Body.Close()
			if err == nil && string(got) != body {
				err = io.ErrShortWrite
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestHandlerAbortResetsStream(t *testing.T) {
	_, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	})})
	res, err := h2cClient(t).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(res.Body)
	_ = res.Body.Close()
	var se http2.StreamError
	if !errorsAs(err, &se) || se.Code != http2.ErrCodeInternal {
		t.Fatalf("want a stream reset with INTERNAL_ERROR, got %v", err)
	}
}

func TestClientCancelCancelsHandler(t *testing.T) {
	started, done := make(chan struct{}), make(chan error, 1)
	_, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		done <- r.Context().Err()
	})})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
	res, err := h2cClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	cancel()
	_ = res.Body.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("handler context not cancelled")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler never saw the client's reset")
	}
}

func TestShutdownSendsGoAwayAndWaits(t *testing.T) {
	release := make(chan struct{})
	inHandler := make(chan struct{}, 1)
	s, addr := serve(t, Config{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler <- struct{}{}
		<-release
		_, _ = io.WriteString(w, "done")
	})})
	c := h2cClient(t)
	got := make(chan string, 1)
	go func() {
		res, err := c.Get("http://" + addr + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		got <- string(b)
	}()
	<-inHandler
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned before the stream finished: %v", err)
	case <-time.After(100 * time.Millisecond): // the stream is still running: Shutdown must wait
	}
	close(release)
	if b := <-got; b != "done" {
		t.Fatalf("in-flight stream: %q", b)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}
