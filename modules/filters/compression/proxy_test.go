package compression_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/compression"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
)

// jsonBody is a JSON document of about n bytes, as an API would answer.
func jsonBody(n int) []byte {
	type item struct {
		ID    int      `json:"id"`
		Name  string   `json:"name"`
		Email string   `json:"email"`
		Tags  []string `json:"tags"`
	}
	out := []byte{'['}
	for i := 0; len(out) < n; i++ {
		if i > 0 {
			out = append(out, ',')
		}
		b, _ := json.Marshal(item{ID: i, Name: fmt.Sprintf("user %d", i), Email: fmt.Sprintf("user%d@example.com", i), Tags: []string{"a", "b"}})
		out = append(out, b...)
	}
	return append(out, ']')
}

func start(t *testing.T, c compression.Config, backend http.HandlerFunc) *filtertest.Harness {
	t.Helper()
	h := filtertest.Start(t, []*irv1.ModuleConfig{core.MustConfig(compression.ModuleID, c)},
		filtertest.Options{Modules: []core.Module{(*compression.Compression)(nil)}, Backend: backend})
	// A request without Accept-Encoding goes without: Go's transport would add gzip and decode
	// the answer out of sight (TestTransparentClient lets it).
	h.Client.Transport.(*http.Transport).DisableCompression = true
	return h
}

// serve answers with body, content type ct and the extra header fields; with chunked, without
// a Content-Length (flushed in two halves, so the engine streams it).
func serve(ct string, body []byte, chunked bool, extra ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(extra); i += 2 {
			w.Header().Add(extra[i], extra[i+1])
		}
		w.Header().Set("Content-Type", ct)
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
			return
		}
		half := len(body) / 2
		_, _ = w.Write(body[:half])
		w.(http.Flusher).Flush()
		_, _ = w.Write(body[half:])
	}
}

// get sends GET with Accept-Encoding accept (none when empty) and returns the response with its
// body decoded as its Content-Encoding says, by the standard library's gzip and the brotli
// package's decoder.
func get(t *testing.T, h *filtertest.Harness, accept string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := h.NewRequest(http.MethodGet, "/data", nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept-Encoding", accept) // set by hand: the transport does not decode
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return send(t, h, req)
}

func send(t *testing.T, h *filtertest.Harness, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	res, err := h.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var r io.Reader = res.Body
	switch res.Header.Get("Content-Encoding") {
	case "gzip":
		gz, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatalf("gzip: %v", err)
		}
		r = gz
	case "br":
		r = brotli.NewReader(res.Body)
	}
	body, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the %q body: %v", res.Header.Get("Content-Encoding"), err)
	}
	return res, body
}

func TestCompresses(t *testing.T) {
	big, small := jsonBody(64<<10), jsonBody(300)
	on := true
	both := compression.Config{Gzip: &on, Brotli: true}
	for _, tc := range []struct {
		name     string
		config   compression.Config
		backend  http.HandlerFunc
		accept   string
		want     string // Content-Encoding
		vary     bool
		original []byte
	}{
		{"gzip with a length", compression.Config{}, serve("application/json", big, false), "gzip", "gzip", true, big},
		{"gzip streamed", compression.Config{}, serve("application/json", big, true), "gzip, deflate", "gzip", true, big},
		{"brotli preferred", both, serve("application/json", big, false), "gzip, deflate, br", "br", true, big},
		{"brotli streamed", both, serve("application/json", big, true), "br", "br", true, big},
		{"gzip by q-value", both, serve("application/json", big, false), "br;q=0.5, gzip", "gzip", true, big},
		{"br refused with q=0", both, serve("application/json", big, false), "br;q=0, gzip;q=0.1", "gzip", true, big},
		{"star", both, serve("application/json", big, false), "*", "br", true, big},
		{"everything refused", both, serve("application/json", big, false), "br;q=0, gzip;q=0", "", true, big},
		{"brotli only, client gzip only", compression.Config{Gzip: new(bool), Brotli: true}, serve("application/json", big, false), "gzip", "", true, big},
		{"no Accept-Encoding", compression.Config{}, serve("application/json", big, false), "", "", true, big},
		{"type with parameters", compression.Config{}, serve("text/html; charset=utf-8", big, false), "gzip", "gzip", true, big},
		{"type not listed", compression.Config{}, serve("image/png", big, false), "gzip", "", false, big},
		{"wildcard type", compression.Config{Types: []string{"image/*"}}, serve("image/svg+xml", big, false), "gzip", "gzip", true, big},
		{"below minSize by length", compression.Config{}, serve("application/json", small, false), "gzip", "", false, small},
		{"below minSize, streamed", compression.Config{}, serve("application/json", small, true), "gzip", "", true, small},
		{"minSize lowered", compression.Config{MinSize: ptr(int32(100))}, serve("application/json", small, false), "gzip", "gzip", true, small},
		{"no-transform", compression.Config{}, serve("application/json", big, false, "Cache-Control", "public, no-transform"), "gzip", "", false, big},
		{"grpc response type", compression.Config{Types: []string{"application/grpc"}}, serve("application/grpc", big, false), "gzip", "", false, big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, tc.config, tc.backend)
			res, body := get(t, h, tc.accept)
			if res.StatusCode != 200 || !bytes.Equal(body, tc.original) {
				t.Fatalf("status %d, decoded body %d bytes (want %d) equal %v", res.StatusCode, len(body), len(tc.original), bytes.Equal(body, tc.original))
			}
			if got := res.Header.Get("Content-Encoding"); got != tc.want {
				t.Errorf("Content-Encoding %q, want %q", got, tc.want)
			}
			if got := res.Header.Values("Vary"); (len(got) == 1 && got[0] == "Accept-Encoding") != tc.vary {
				t.Errorf("Vary %q, want Accept-Encoding: %v", got, tc.vary)
			}
			if tc.want != "" {
				// The upstream's length is gone; the engine may set the compressed one when the
				// whole body fits its buffer.
				if res.ContentLength == int64(len(tc.original)) {
					t.Errorf("a compressed response has the identity Content-Length (%d)", res.ContentLength)
				}
			} else if !strings.HasSuffix(tc.name, "streamed") && res.ContentLength != int64(len(tc.original)) {
				t.Errorf("an identity response lost its Content-Length (%d)", res.ContentLength)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestTransparentClient: Go's own client asks for gzip and decodes it without being told.
func TestTransparentClient(t *testing.T) {
	big := jsonBody(8 << 10)
	h := start(t, compression.Config{}, serve("application/json", big, false))
	res, err := http.Get(h.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || !res.Uncompressed || !bytes.Equal(body, big) {
		t.Errorf("uncompressed by the transport %v, body equal %v (%v)", res.Uncompressed, bytes.Equal(body, big), err)
	}
}

func TestHeaders(t *testing.T) {
	big := jsonBody(4 << 10)
	for _, tc := range []struct {
		name       string
		extra      []string
		etag, vary string
	}{
		{"strong ETag is weakened", []string{"ETag", `"v1"`}, `W/"v1"`, "Accept-Encoding"},
		{"weak ETag stays", []string{"ETag", `W/"v1"`}, `W/"v1"`, "Accept-Encoding"},
		{"Vary is appended to", []string{"Vary", "Origin"}, "", "Origin, Accept-Encoding"},
		{"Vary is not repeated", []string{"Vary", "accept-encoding, Origin"}, "", "accept-encoding, Origin"},
		{"Vary star stays", []string{"Vary", "*"}, "", "*"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, compression.Config{}, serve("text/plain", big, false, append(tc.extra, "Accept-Ranges", "bytes")...))
			res, body := get(t, h, "gzip")
			if res.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(body, big) {
				t.Fatalf("Content-Encoding %q, body equal %v", res.Header.Get("Content-Encoding"), bytes.Equal(body, big))
			}
			if got := res.Header.Get("ETag"); got != tc.etag {
				t.Errorf("ETag %q, want %q", got, tc.etag)
			}
			if got := strings.Join(res.Header.Values("Vary"), ", "); got != tc.vary {
				t.Errorf("Vary %q, want %q", got, tc.vary)
			}
			if got := res.Header.Get("Accept-Ranges"); got != "" {
				t.Errorf("Accept-Ranges %q on a compressed response", got)
			}
		})
	}
}

// TestNotCompressed: the requests and responses compression must leave alone.
func TestNotCompressed(t *testing.T) {
	big := jsonBody(8 << 10)
	content := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"e1"`)
		http.ServeContent(w, r, "data.json", time.Unix(1e9, 0), bytes.NewReader(big))
	}
	h := start(t, compression.Config{}, content)

	res, body := get(t, h, "gzip", "Range", "bytes=0-99")
	if res.StatusCode != http.StatusPartialContent || res.Header.Get("Content-Encoding") != "" || !bytes.Equal(body, big[:100]) {
		t.Errorf("Range: status %d, Content-Encoding %q, body %d bytes", res.StatusCode, res.Header.Get("Content-Encoding"), len(body))
	}
	res, _ = get(t, h, "gzip", "If-None-Match", `"e1"`)
	if res.StatusCode != http.StatusNotModified || res.Header.Get("Content-Encoding") != "" || res.Header.Get("ETag") != `"e1"` {
		t.Errorf("304: status %d, Content-Encoding %q, ETag %q", res.StatusCode, res.Header.Get("Content-Encoding"), res.Header.Get("ETag"))
	}
	req, _ := h.NewRequest(http.MethodHead, "/data", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, _ = send(t, h, req)
	if res.Header.Get("Content-Encoding") != "" || res.ContentLength != int64(len(big)) {
		t.Errorf("HEAD: Content-Encoding %q, Content-Length %d", res.Header.Get("Content-Encoding"), res.ContentLength)
	}

	gzipped := gzipOf(t, big)
	pre := start(t, compression.Config{}, serve("application/json", gzipped, false, "Content-Encoding", "gzip"))
	res, body = get(t, pre, "gzip, br")
	if res.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(body, big) {
		t.Errorf("already encoded: Content-Encoding %q, decoded equal %v (compressed twice?)", res.Header.Get("Content-Encoding"), bytes.Equal(body, big))
	}

	empty := start(t, compression.Config{}, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNoContent)
	})
	if res, _ = get(t, empty, "gzip"); res.StatusCode != http.StatusNoContent || res.Header.Get("Content-Encoding") != "" {
		t.Errorf("204: status %d, Content-Encoding %q", res.StatusCode, res.Header.Get("Content-Encoding"))
	}

	grpc := start(t, compression.Config{}, serve("application/json", big, false))
	res, body = get(t, grpc, "gzip", "Content-Type", "application/grpc")
	if res.Header.Get("Content-Encoding") != "" || !bytes.Equal(body, big) {
		t.Errorf("gRPC request: Content-Encoding %q", res.Header.Get("Content-Encoding"))
	}
}

func gzipOf(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestTrailers: a compressed chunked response keeps the upstream's trailers.
func TestTrailers(t *testing.T) {
	big := jsonBody(16 << 10)
	h := start(t, compression.Config{}, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Trailer", "X-Checksum")
		_, _ = w.Write(big)
		w.Header().Set("X-Checksum", "c0ffee")
	})
	req, _ := h.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, body := send(t, h, req)
	if res.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(body, big) {
		t.Fatalf("Content-Encoding %q, body equal %v", res.Header.Get("Content-Encoding"), bytes.Equal(body, big))
	}
	if got := res.Trailer.Get("X-Checksum"); got != "c0ffee" {
		t.Errorf("trailer X-Checksum %q, want c0ffee (trailers %v)", got, res.Trailer)
	}
}

// TestEventStream: events reach the client as the backend flushes them, whether the stream is
// compressed (text/event-stream listed) or not (the default types): the backend writes the next
// event only once the client has read the previous one.
func TestEventStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config compression.Config
		accept string
		want   string
	}{
		{"not listed", compression.Config{}, "gzip", ""},
		{"gzip", compression.Config{Types: []string{"text/event-stream"}}, "gzip", "gzip"},
		{"brotli", compression.Config{Brotli: true, Types: []string{"text/event-stream"}}, "br", "br"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := make(chan int)
			h := start(t, tc.config, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				for i := range 3 {
					fmt.Fprintf(w, "data: event %d\n\n", i)
					w.(http.Flusher).Flush()
					select {
					case <-read:
					case <-r.Context().Done():
						return
					case <-time.After(10 * time.Second):
						return // the test fails on the client side
					}
				}
			})
			req, _ := h.NewRequest(http.MethodGet, "/events", nil)
			req.Header.Set("Accept-Encoding", tc.accept)
			res, err := h.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if got := res.Header.Get("Content-Encoding"); got != tc.want {
				t.Fatalf("Content-Encoding %q, want %q", got, tc.want)
			}
			var r io.Reader = res.Body
			switch tc.want {
			case "gzip":
				if r, err = gzip.NewReader(res.Body); err != nil {
					t.Fatal(err)
				}
			case "br":
				r = brotli.NewReader(res.Body)
			}
			lines := bufio.NewReader(r)
			for i := range 3 {
				line, err := lines.ReadString('\n')
				if err != nil || line != fmt.Sprintf("data: event %d\n", i) {
					t.Fatalf("event %d: %q, %v", i, line, err)
				}
				_, _ = lines.ReadString('\n')
				read <- i
			}
		})
	}
}

// TestUpstreamFailure: a body that breaks off mid-stream is a broken response for the client, as
// without compression, and the proxy goes on serving.
func TestUpstreamFailure(t *testing.T) {
	big := jsonBody(64 << 10)
	h := start(t, compression.Config{}, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			serve("application/json", big, false)(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		_, _ = w.Write(big[:len(big)/2])
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0)
			_ = conn.Close()
		}
	})
	req, _ := h.NewRequest(http.MethodGet, "/broken", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := h.Client.Do(req)
	if err == nil {
		var gz *gzip.Reader
		if gz, err = gzip.NewReader(res.Body); err == nil {
			_, err = io.ReadAll(gz)
		}
		res.Body.Close()
	}
	if err == nil {
		t.Error("a response cut off upstream reached the client complete")
	}
	for range 3 {
		req, _ := h.NewRequest(http.MethodGet, "/ok", nil)
		req.Header.Set("Accept-Encoding", "gzip")
		if res, body := send(t, h, req); res.StatusCode != 200 || !bytes.Equal(body, big) {
			t.Fatalf("after a failure: status %d, body equal %v", res.StatusCode, bytes.Equal(body, big))
		}
	}
}
