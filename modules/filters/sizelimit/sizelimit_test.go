package sizelimit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coxswain-labs/coxswain/core"
)

func newFilter(t testing.TB, size string) *RequestSizeLimit {
	t.Helper()
	f := &RequestSizeLimit{Config: Config{MaxSize: size}}
	if err := f.Provision(nil); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestDeclaredLength(t *testing.T) {
	f := newFilter(t, "1k")
	for n, want := range map[int]bool{0: true, 1: true, 1024: true, 1025: false, 1 << 20: false} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", n)))
		body := r.Body
		w := httptest.NewRecorder()
		if got := f.FilterRequest(w, r); got != want {
			t.Errorf("%d bytes: proceed = %v, want %v", n, got, want)
		}
		if want && r.Body != body {
			t.Errorf("%d bytes: the body was wrapped, though its length is declared", n)
		}
		if !want && (w.Code != http.StatusRequestEntityTooLarge || strings.TrimSpace(w.Body.String()) != TooLargeMessage) {
			t.Errorf("%d bytes: %d %q, want 413", n, w.Code, w.Body)
		}
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 2000)))
	r.Header.Set("Content-Type", "application/grpc")
	w := httptest.NewRecorder()
	if f.FilterRequest(w, r) || w.Header().Get("Grpc-Status") != "8" {
		t.Errorf("gRPC over the limit: %d %v, want RESOURCE_EXHAUSTED", w.Code, w.Header())
	}
}

// TestStreamedLength: a body of unknown length is handed on up to the limit, and fails with
// core.ErrBodyTooLarge, having passed on no byte beyond it, as soon as there is more.
func TestStreamedLength(t *testing.T) {
	for _, tt := range []struct {
		size string
		n    int
	}{{"0", 0}, {"0", 1}, {"1k", 1023}, {"1k", 1024}, {"1k", 1025}, {"1k", 100000}, {"64k", 65536}, {"64k", 65537}} {
		f := newFilter(t, tt.size)
		src := &counter{left: int64(tt.n)}
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Body, r.ContentLength = io.NopCloser(iotest.OneByteReader(src)), -1
		if tt.n%2 == 1 { // and with reads of any size
			r.Body = io.NopCloser(src)
		}
		if !f.FilterRequest(httptest.NewRecorder(), r) {
			t.Fatalf("%s/%d: refused before reading", tt.size, tt.n)
		}
		got, err := io.ReadAll(r.Body)
		over := int64(tt.n) > f.Limit()
		if over {
			st, ok := core.ErrorStatus(err)
			if !errors.Is(err, core.ErrBodyTooLarge) || !ok || st != http.StatusRequestEntityTooLarge {
				t.Errorf("%s/%d: error %v (status %d %v), want ErrBodyTooLarge", tt.size, tt.n, err, st, ok)
			}
			if int64(len(got)) != f.Limit() {
				t.Errorf("%s/%d: handed on %d bytes, want exactly the limit %d", tt.size, tt.n, len(got), f.Limit())
			}
			if src.read > f.Limit()+64<<10 {
				t.Errorf("%s/%d: read %d bytes of the source", tt.size, tt.n, src.read)
			}
			if _, err := r.Body.Read(make([]byte, 10)); !errors.Is(err, core.ErrBodyTooLarge) {
				t.Errorf("%s/%d: a read after the error: %v", tt.size, tt.n, err)
			}
			continue
		}
		if err != nil || len(got) != tt.n {
			t.Errorf("%s/%d: %d bytes, %v; want the whole body", tt.size, tt.n, len(got), err)
		}
	}
}

// counter is a body of left zero bytes that counts what was read of it.
type counter struct{ left, read int64 }

func (c *counter) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	clear(p)
	c.left -= int64(len(p))
	c.read += int64(len(p))
	return len(p), nil
}

func TestInvalidSizeFailsOpen(t *testing.T) {
	obs, logs := observer.New(zapcore.WarnLevel)
	bc := core.NewBuildContext(context.Background(), zap.New(obs), core.NewRegistry((*RequestSizeLimit)(nil)), nil)
	t.Cleanup(func() { _ = bc.Close() })
	f := &RequestSizeLimit{Config: Config{MaxSize: "10kb"}}
	if err := f.Provision(bc); err != nil {
		t.Fatal(err)
	}
	if f.Limit() != -1 || logs.Len() != 1 {
		t.Errorf("limit %d, logs %+v", f.Limit(), logs.All())
	}
	if w := f.ConfigWarnings(); len(w) != 1 || !strings.Contains(w[0], "ambiguous") || !strings.Contains(w[0], "not enforced") {
		t.Errorf("warnings %q", w)
	}
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", 1<<20)))
	if !f.FilterRequest(httptest.NewRecorder(), r) {
		t.Error("an unparseable limit refused a request")
	}
	if w := newFilter(t, "1m").ConfigWarnings(); w != nil {
		t.Errorf("a valid size warns %q", w)
	}
}

func TestLoad(t *testing.T) {
	bc := core.NewBuildContext(context.Background(), nil, core.NewRegistry((*RequestSizeLimit)(nil)), nil)
	t.Cleanup(func() { _ = bc.Close() })
	mc := core.MustConfig(ModuleID, nil)
	mc.Json = []byte(`{"maxSize":"10m"}`)
	m, err := core.Load[core.HTTPRequestFilter](bc, mc)
	if err != nil || m.(*RequestSizeLimit).Limit() != 10<<20 {
		t.Errorf("Load: %v %v", m, err)
	}
	mc.Json = []byte(`{"maxBytes":10}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, mc); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: error = %v", err)
	}
	if err := API.Check(ModuleID); err != nil {
		t.Error(err)
	}
	exts, errs := core.NewRegistry((*RequestSizeLimit)(nil)).Extensions()
	if len(errs) != 0 || !reflect.DeepEqual(exts[ModuleID], API) {
		t.Errorf("Extensions() = %v, %v", exts, errs)
	}
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Errorf("%s is not registered", ModuleID)
	}
}

// TestNoAllocation: bodyless requests and declared lengths within the limit cost nothing.
func TestNoAllocation(t *testing.T) {
	f := newFilter(t, "1m")
	get := httptest.NewRequest(http.MethodGet, "/", nil)
	post := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("small"))
	for name, r := range map[string]*http.Request{"GET": get, "POST with Content-Length": post} {
		if n := testing.AllocsPerRun(100, func() { f.FilterRequest(nil, r) }); n != 0 {
			t.Errorf("%s: %v allocs, want 0", name, n)
		}
	}
}

func BenchmarkFilterRequest(b *testing.B) {
	f := newFilter(b, "1m")
	for _, tc := range []struct {
		name string
		r    *http.Request
	}{
		{"bodyless", httptest.NewRequest(http.MethodGet, "/", nil)},
		{"declared", httptest.NewRequest(http.MethodPost, "/", strings.NewReader("small"))},
		{"streamed", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", nil)
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("x")), -1
			return r
		}()},
	} {
		body := tc.r.Body
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tc.r.Body = body
				f.FilterRequest(nil, tc.r)
			}
		})
	}
}
