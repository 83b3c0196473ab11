package compression_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/coxswain-labs/coxswain/modules/filters/compression"
)

// discard is the engine's response writer reduced to what the module uses: a header map that
// is reset between requests, a Flush, and a sink counting the bytes.
type discard struct {
	h http.Header
	n int64
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }
func (d *discard) Flush()                      {}

// BenchmarkCompression is one response through the module's middleware, as the engine runs it:
// a handler writing a JSON body with its Content-Length, gzip or brotli at the default level 6
// (identity is the module's cost when the client accepts neither). It reports the compressed
// size as bytes/resp.
func BenchmarkCompression(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}} {
		body := jsonBody(size.n)[:size.n]
		length := strconv.Itoa(len(body))
		for _, enc := range []struct{ name, accept string }{{"identity", "identity"}, {"gzip", "gzip"}, {"brotli", "br"}} {
			b.Run(enc.name+"/"+size.name, func(b *testing.B) {
				m := &compression.Compression{Config: compression.Config{Brotli: true}}
				if err := m.Provision(nil); err != nil {
					b.Fatal(err)
				}
				h := m.WrapHTTP(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.Header()["Content-Type"] = []string{"application/json"}
					w.Header()["Content-Length"] = []string{length}
					_, _ = w.Write(body)
				}))
				r := httptest.NewRequest(http.MethodGet, "/", nil)
				r.Header.Set("Accept-Encoding", enc.accept)
				w := &discard{h: http.Header{}}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					clear(w.h)
					w.n = 0
					h.ServeHTTP(w, r)
				}
				b.ReportMetric(float64(w.n), "bytes/resp")
			})
		}
	}
}
