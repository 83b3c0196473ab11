package headers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
)

func newRequestModifier(t testing.TB, c Config) *RequestModifier {
	t.Helper()
	m := &RequestModifier{Config: c}
	if err := m.Provision(nil); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	return m
}

func header(pairs ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Add(pairs[i], pairs[i+1])
	}
	return h
}

// TestRequestModifierConformance replays the httproute-request-header-modifier conformance cases:
// the header the backend sees, with repeated values joined by ",", and the headers it must not see.
func TestRequestModifierConformance(t *testing.T) {
	multiple := Config{
		Set:    []Header{{"X-Header-Set-1", "header-set-1"}, {"X-Header-Set-2", "header-set-2"}},
		Add:    []Header{{"X-Header-Add-1", "header-add-1"}, {"X-Header-Add-2", "header-add-2"}, {"X-Header-Add-3", "header-add-3"}},
		Remove: []string{"X-Header-Remove-1", "X-Header-Remove-2"},
	}
	tests := []struct {
		name   string
		config Config
		in     []string
		want   map[string]string
		absent []string
	}{
		{"set adds a missing header", Config{Set: []Header{{"X-Header-Set", "set-overwrites-values"}}},
			[]string{"Some-Other-Header", "val"},
			map[string]string{"Some-Other-Header": "val", "X-Header-Set": "set-overwrites-values"}, nil},
		{"set overwrites an existing header", Config{Set: []Header{{"X-Header-Set", "set-overwrites-values"}}},
			[]string{"Some-Other-Header", "val", "X-Header-Set", "some-other-value"},
			map[string]string{"Some-Other-Header": "val", "X-Header-Set": "set-overwrites-values"}, nil},
		{"set overwrites every value of a repeated header", Config{Set: []Header{{"X-Header-Set", "v"}}},
			[]string{"X-Header-Set", "a", "X-Header-Set", "b"},
			map[string]string{"X-Header-Set": "v"}, nil},
		{"add adds a missing header", Config{Add: []Header{{"X-Header-Add", "add-appends-values"}}},
			[]string{"Some-Other-Header", "val"},
			map[string]string{"Some-Other-Header": "val", "X-Header-Add": "add-appends-values"}, nil},
		{"add appends to an existing header", Config{Add: []Header{{"X-Header-Add", "add-appends-values"}}},
			[]string{"Some-Other-Header", "val", "X-Header-Add", "some-other-value"},
			map[string]string{"Some-Other-Header": "val", "X-Header-Add": "some-other-value,add-appends-values"}, nil},
		{"remove deletes a header", Config{Remove: []string{"X-Header-Remove"}},
			[]string{"X-Header-Remove", "val"}, map[string]string{}, []string{"X-Header-Remove"}},
		{"multiple set, add and remove", multiple,
			[]string{"X-Header-Set-2", "set-val-2", "X-Header-Add-2", "add-val-2", "X-Header-Remove-2", "remove-val-2", "Another-Header", "another-header-val"},
			map[string]string{
				"X-Header-Set-1": "header-set-1", "X-Header-Set-2": "header-set-2",
				"X-Header-Add-1": "header-add-1", "X-Header-Add-2": "add-val-2,header-add-2", "X-Header-Add-3": "header-add-3",
				"Another-Header": "another-header-val",
			}, []string{"X-Header-Remove-1", "X-Header-Remove-2"}},
		{"names are case-insensitive", Config{
			Set: []Header{{"x-header-set", "header-set"}}, Add: []Header{{"X-HEADER-ADD", "header-add"}}, Remove: []string{"x-Header-remove"},
		},
			[]string{"x-header-set", "original-val-set", "x-header-add", "original-val-add", "x-header-remove", "original-val-remove", "Another-Header", "another-header-val"},
			map[string]string{"X-Header-Set": "header-set", "X-Header-Add": "original-val-add,header-add", "Another-Header": "another-header-val"},
			[]string{"X-Header-Remove"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newRequestModifier(t, tt.config)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header = header(tt.in...)
			if !m.FilterRequest(httptest.NewRecorder(), r) {
				t.Fatal("FilterRequest did not proceed")
			}
			expectHeader(t, r.Header, tt.want, tt.absent)
		})
	}
}

func expectHeader(t *testing.T, h http.Header, want map[string]string, absent []string) {
	t.Helper()
	for k, v := range want {
		if got := strings.Join(h.Values(k), ","); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if len(h) != len(want) {
		t.Errorf("header has %d names (%v), want %d", len(h), h, len(want))
	}
	for _, k := range absent {
		if _, ok := h[http.CanonicalHeaderKey(k)]; ok {
			t.Errorf("%s present, want absent", k)
		}
	}
}

func TestRequestModifierHost(t *testing.T) {
	tests := []struct {
		name     string
		config   Config
		wantHost string
	}{
		{"set Host sets r.Host", Config{Set: []Header{{"host", "backend.example"}}}, "backend.example"},
		{"add Host sets r.Host", Config{Add: []Header{{"Host", "backend.example:8080"}}}, "backend.example:8080"},
		{"remove Host is ignored", Config{Remove: []string{"Host"}}, "front.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newRequestModifier(t, tt.config)
			r := httptest.NewRequest(http.MethodGet, "http://front.example/", nil)
			m.FilterRequest(httptest.NewRecorder(), r)
			if r.Host != tt.wantHost {
				t.Errorf("r.Host = %q, want %q", r.Host, tt.wantHost)
			}
			if _, ok := r.Header["Host"]; ok {
				t.Error("Host leaked into r.Header, where Go ignores it")
			}
		})
	}
}

// TestResponseModifierConformance replays httproute-response-header-modifier.
func TestResponseModifierConformance(t *testing.T) {
	tests := []struct {
		name   string
		config Config
		in     []string
		want   map[string]string
		absent []string
	}{
		{"set", Config{Set: []Header{{"X-Header-Set", "set-overwrites-values"}}},
			[]string{"Some-Other-Header", "val"},
			map[string]string{"Some-Other-Header": "val", "X-Header-Set": "set-overwrites-values"}, nil},
		{"set overwrites", Config{Set: []Header{{"X-Header-Set", "set-overwrites-values"}}},
			[]string{"X-Header-Set", "some-other-value"},
			map[string]string{"X-Header-Set": "set-overwrites-values"}, nil},
		{"add appends", Config{Add: []Header{{"X-Header-Add", "add-appends-values"}}},
			[]string{"X-Header-Add", "some-other-value"},
			map[string]string{"X-Header-Add": "some-other-value,add-appends-values"}, nil},
		{"remove", Config{Remove: []string{"X-Header-Remove"}},
			[]string{"X-Header-Remove", "val"}, map[string]string{}, []string{"X-Header-Remove"}},
		{"Host is an ordinary response header", Config{Set: []Header{{"Host", "x"}}},
			nil, map[string]string{"Host": "x"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &ResponseModifier{Config: tt.config}
			if err := m.Provision(nil); err != nil {
				t.Fatal(err)
			}
			h := header(tt.in...)
			m.FilterResponse(httptest.NewRequest(http.MethodGet, "/", nil), http.StatusOK, h)
			expectHeader(t, h, tt.want, tt.absent)
		})
	}
}

// TestSharedSetValues checks that the value slice Set shares across requests is never written
// through: an Add on one request must not show up on another.
func TestSharedSetValues(t *testing.T) {
	set := newRequestModifier(t, Config{Set: []Header{{"X-A", "1"}}})
	add := newRequestModifier(t, Config{Add: []Header{{"X-A", "2"}}})
	r1 := httptest.NewRequest(http.MethodGet, "/", nil)
	set.FilterRequest(nil, r1)
	add.FilterRequest(nil, r1)
	r2 := httptest.NewRequest(http.MethodGet, "/", nil)
	set.FilterRequest(nil, r2)
	if got := r2.Header.Values("X-A"); len(got) != 1 || got[0] != "1" {
		t.Errorf("second request X-A = %q, want [1]", got)
	}
	if got := r1.Header.Values("X-A"); len(got) != 2 {
		t.Errorf("first request X-A = %q, want [1 2]", got)
	}
}

func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		config Config
		want   string
	}{
		{"set name with space", Config{Set: []Header{{"X A", "v"}}}, "invalid header name"},
		{"add name with colon", Config{Add: []Header{{":path", "v"}}}, "invalid header name"},
		{"remove empty name", Config{Remove: []string{""}}, "invalid header name"},
		{"set value with CRLF", Config{Set: []Header{{"X-A", "v\r\nX-Injected: 1"}}}, "invalid value"},
		{"add value with LF", Config{Add: []Header{{"X-A", "v\nw"}}}, "invalid value"},
		{"set Host with a slash", Config{Set: []Header{{"Host", "a/b"}}}, "invalid Host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &RequestModifier{Config: tt.config}
			if err := m.Provision(nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Provision error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	reg := core.NewRegistry((*RequestModifier)(nil), (*ResponseModifier)(nil))
	bc := core.NewBuildContext(context.Background(), nil, reg, nil)
	t.Cleanup(func() { _ = bc.Close() })
	if _, err := core.Load[core.HTTPRequestFilter](bc, core.MustConfig(RequestModuleID, Config{Set: []Header{{"X-A", "1"}}})); err != nil {
		t.Errorf("load request modifier: %v", err)
	}
	if _, err := core.Load[core.HTTPResponseFilter](bc, core.MustConfig(ResponseModuleID, Config{Remove: []string{"Server"}})); err != nil {
		t.Errorf("load response modifier: %v", err)
	}
	bad := core.MustConfig(RequestModuleID, nil)
	bad.Json = []byte(`{"set":[{"name":"X-A","value":"1","append":true}]}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, bad); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: error = %v", err)
	}
	for _, id := range []core.ModuleID{RequestModuleID, ResponseModuleID} {
		if _, ok := core.Freeze().Lookup(id); !ok {
			t.Errorf("%s is not registered", id)
		}
	}
}

func BenchmarkRequestModifier(b *testing.B) {
	m := newRequestModifier(b, Config{
		Set:    []Header{{"X-Env", "prod"}, {"Host", "backend.internal"}},
		Add:    []Header{{"X-Trace", "coxswain"}},
		Remove: []string{"X-Internal"},
	})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header = header("X-Trace", "client", "Accept", "*/*")
	orig := r.Header["X-Trace"][:1:1]
	b.ReportAllocs()
	for b.Loop() {
		r.Header["X-Trace"] = orig
		r.Header["X-Internal"] = orig
		m.FilterRequest(nil, r)
	}
}

func BenchmarkRequestModifierSetRemove(b *testing.B) {
	m := newRequestModifier(b, Config{Set: []Header{{"X-Env", "prod"}}, Remove: []string{"X-Internal"}})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	b.ReportAllocs()
	for b.Loop() {
		m.FilterRequest(nil, r)
	}
}

func BenchmarkResponseModifier(b *testing.B) {
	m := &ResponseModifier{Config: Config{Set: []Header{{"X-Frame-Options", "DENY"}}, Remove: []string{"Server"}}}
	if err := m.Provision(nil); err != nil {
		b.Fatal(err)
	}
	h := header("Server", "upstream", "Content-Type", "text/plain")
	b.ReportAllocs()
	for b.Loop() {
		m.FilterResponse(nil, http.StatusOK, h)
	}
}
