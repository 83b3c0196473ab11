package compression

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
)

func TestNegotiate(t *testing.T) {
	for _, tc := range []struct {
		accept         []string
		gzipOn, brOn   bool
		want           encoding
		wantGzipOnly   encoding // with brotli off
		wantBrotliOnly encoding // with gzip off
	}{
		{accept: nil, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
		{accept: []string{""}, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
		{accept: []string{"gzip"}, want: gzipEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: identity},
		{accept: []string{"br"}, want: brotliEnc, wantGzipOnly: identity, wantBrotliOnly: brotliEnc},
		{accept: []string{"gzip, deflate, br, zstd"}, want: brotliEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: brotliEnc},
		{accept: []string{"gzip", "br"}, want: brotliEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: brotliEnc},
		{accept: []string{"gzip;q=1.0, br;q=0.5"}, want: gzipEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: brotliEnc},
		{accept: []string{"gzip ; q=0.8 , br;Q=0.8"}, want: brotliEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: brotliEnc},
		{accept: []string{"br;q=0, gzip"}, want: gzipEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: identity},
		{accept: []string{"gzip;q=0"}, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
		{accept: []string{"gzip;q=0.000, br;q=0.001"}, want: brotliEnc, wantGzipOnly: identity, wantBrotliOnly: brotliEnc},
		{accept: []string{"x-gzip"}, want: gzipEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: identity},
		{accept: []string{"GZIP"}, want: gzipEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: identity},
		{accept: []string{"identity"}, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
		{accept: []string{"*"}, want: brotliEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: brotliEnc},
		{accept: []string{"*;q=0"}, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
		{accept: []string{"gzip;q=0, *"}, want: brotliEnc, wantGzipOnly: identity, wantBrotliOnly: brotliEnc},
		{accept: []string{"br;q=0.5, *;q=0.9"}, want: gzipEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: brotliEnc},
		{accept: []string{"*;q=0, br"}, want: brotliEnc, wantGzipOnly: identity, wantBrotliOnly: brotliEnc},
		// Malformed weights: the item is ignored.
		{accept: []string{"gzip;q=2"}, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
		{accept: []string{"gzip;q=0.0001"}, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
		{accept: []string{"gzip;q=1.5, br"}, want: brotliEnc, wantGzipOnly: identity, wantBrotliOnly: brotliEnc},
		{accept: []string{"gzip;q=abc"}, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
		{accept: []string{"gzip;level=1;q=0.5"}, want: gzipEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: identity},
		{accept: []string{",,gzip,,"}, want: gzipEnc, wantGzipOnly: gzipEnc, wantBrotliOnly: identity},
		{accept: []string{"gzipped, brotli"}, want: identity, wantGzipOnly: identity, wantBrotliOnly: identity},
	} {
		name := strings.Join(tc.accept, " | ")
		for _, c := range []struct {
			gz, br bool
			want   encoding
		}{{true, true, tc.want}, {true, false, tc.wantGzipOnly}, {false, true, tc.wantBrotliOnly}} {
			if got := negotiate(tc.accept, c.gz, c.br); got != c.want {
				t.Errorf("Accept-Encoding %q, gzip %v brotli %v: %s, want %s", name, c.gz, c.br, got.name(), c.want.name())
			}
		}
	}
}

func TestNegotiateDoesNotAllocate(t *testing.T) {
	v := []string{"gzip, deflate;q=0.9, br;q=1.0, zstd, *;q=0.1"}
	if n := testing.AllocsPerRun(100, func() { negotiate(v, true, true) }); n != 0 {
		t.Errorf("negotiate: %v allocations, want 0", n)
	}
}

func provisioned(t testing.TB, c Config) *Compression {
	t.Helper()
	m := &Compression{Config: c}
	if err := m.Provision(nil); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCompressible(t *testing.T) {
	def := provisioned(t, Config{})
	wild := provisioned(t, Config{Types: []string{"text/*", "Application/JSON", "application/grpc", "application/*"}})
	for _, tc := range []struct {
		ct        string
		def, wild bool
	}{
		{"text/html", true, true},
		{"text/html; charset=utf-8", true, true},
		{"TEXT/HTML;charset=UTF-8", true, true},
		{" application/json ", true, true},
		{"application/javascript", true, true},
		{"text/css", true, true},
		{"text/plain", true, true},
		{"text/csv", false, true},
		{"text/", false, false},
		{"image/png", false, false},
		{"application/json-seq", false, true},
		{"application/grpc", false, false},
		{"application/grpc+proto", false, false},
		{"application/grpc-web", false, false},
		{"", false, false},
	} {
		if got := def.compressible(tc.ct); got != tc.def {
			t.Errorf("default types, %q: %v, want %v", tc.ct, got, tc.def)
		}
		if got := wild.compressible(tc.ct); got != tc.wild {
			t.Errorf("text/* and application/*, %q: %v, want %v", tc.ct, got, tc.wild)
		}
	}
	if n := testing.AllocsPerRun(100, func() { def.compressible("application/json; charset=utf-8") }); n != 0 {
		t.Errorf("compressible: %v allocations", n)
	}
}

func TestDefaults(t *testing.T) {
	m := provisioned(t, Config{})
	if !m.gzipOn || m.Brotli || m.level != DefaultLevel || m.minSize != DefaultMinSize || len(m.exact) != len(DefaultTypes) {
		t.Errorf("defaults: gzip %v brotli %v level %d minSize %d types %v", m.gzipOn, m.Brotli, m.level, m.minSize, m.exact)
	}
	off, zero := false, int32(0)
	m = provisioned(t, Config{Gzip: &off, Brotli: true, Level: 9, MinSize: &zero})
	if m.gzipOn || !m.Brotli || m.level != 9 || m.minSize != 0 {
		t.Errorf("set: gzip %v brotli %v level %d minSize %d", m.gzipOn, m.Brotli, m.level, m.minSize)
	}
}

func TestCheckConfig(t *testing.T) {
	neg, big := int32(-1), int32(2<<20)
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"level", Config{Level: 10}, "level 10"},
		{"negative minSize", Config{MinSize: &neg}, "minSize -1"},
		{"huge minSize", Config{MinSize: &big}, "minSize 2097152"},
		{"parameters", Config{Types: []string{"text/html; charset=utf-8"}}, "not a media type"},
		{"no subtype", Config{Types: []string{"text"}}, "not a media type"},
		{"any type", Config{Types: []string{"*/*"}}, "not a media type"},
		{"twice", Config{Types: []string{"text/html", "TEXT/html"}}, "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := (&Compression{Config: tc.c}).CheckConfig(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckConfig = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestConfigWarnings(t *testing.T) {
	off := false
	w := (&Compression{Config: Config{Gzip: &off, Types: []string{"application/grpc+proto", "text/html"}}}).ConfigWarnings()
	if len(w) != 2 || !strings.Contains(w[0], "nothing is compressed") || !strings.Contains(w[1], "application/grpc+proto is never compressed") {
		t.Errorf("warnings %q", w)
	}
	if w := (&Compression{}).ConfigWarnings(); len(w) != 0 {
		t.Errorf("defaults warn: %q", w)
	}
}

func TestLoad(t *testing.T) {
	reg := core.NewRegistry((*Compression)(nil))
	bc := core.NewBuildContext(context.Background(), nil, reg, nil)
	t.Cleanup(func() { _ = bc.Close() })
	mc := core.MustConfig(ModuleID, nil)
	mc.Json = []byte(`{"gzip":true,"brotli":true,"level":5,"minSize":10,"types":["text/*"]}`)
	if _, err := core.Load[core.HTTPMiddleware](bc, mc); err != nil {
		t.Errorf("Load: %v", err)
	}
	mc.Json = []byte(`{"zstd":true}`)
	if _, err := core.Load[core.HTTPMiddleware](bc, mc); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: error = %v", err)
	}
	if err := API.Check(ModuleID); err != nil {
		t.Error(err)
	}
	exts, errs := core.NewRegistry((*Compression)(nil)).Extensions()
	if len(errs) != 0 || !reflect.DeepEqual(exts[ModuleID], API) {
		t.Errorf("Extensions() = %v, %v", exts, errs)
	}
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Errorf("%s is not registered", ModuleID)
	}
}

func TestDeepCopy(t *testing.T) {
	on, n := true, int32(5)
	in := Config{Gzip: &on, MinSize: &n, Types: []string{"text/html"}}
	var out Config
	in.DeepCopyInto(&out)
	*out.Gzip, *out.MinSize, out.Types[0] = false, 6, "x/y"
	if !*in.Gzip || *in.MinSize != 5 || in.Types[0] != "text/html" {
		t.Errorf("DeepCopyInto shares memory: %+v", in)
	}
}
