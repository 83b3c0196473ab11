package cors

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newCORS(t testing.TB, c Config) *CORS {
	t.Helper()
	m := &CORS{Config: c}
	if err := m.Provision(nil); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	return m
}

func TestOriginMatching(t *testing.T) {
	c := newCORS(t, Config{AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com", "http://*:8080", "http://[::1]:3000"}})
	for origin, want := range map[string]bool{
		"https://www.foo.com":      true,
		"HTTPS://WWW.FOO.COM":      true, // schemes and hosts are case-insensitive
		"https://www.foo.com:443":  true, // the default port is the same origin
		"https://www.foo.com:444":  false,
		"http://www.foo.com":       false,
		"https://foo.com":          false,
		"https://www.bar.com":      true,
		"https://xpto.www.bar.com": true,  // "*" spans any number of labels
		"https://bar.com":          false, // but at least one
		"https://evilbar.com":      false,
		"https://www.bar.com.evil": false,
		"http://anything:8080":     true,
		"http://anything":          false,
		"http://[::1]:3000":        true,
		"null":                     false,
		"https://www.foo.com/path": false,
		"":                         false,
	} {
		if got := c.allowed(origin); got != want {
			t.Errorf("allowed(%q) = %v, want %v", origin, got, want)
		}
	}
}

// preflight sends a preflight through the filter and returns the response.
func preflight(c *CORS, origin, method, headers string) (*httptest.ResponseRecorder, bool) {
	r := httptest.NewRequest(http.MethodOptions, "/", nil)
	r.Header.Set("Origin", origin)
	if method != "" {
		r.Header.Set("Access-Control-Request-Method", method)
	}
	if headers != "" {
		r.Header.Set("Access-Control-Request-Headers", headers)
	}
	w := httptest.NewRecorder()
	return w, c.FilterRequest(w, r)
}

func TestPreflight(t *testing.T) {
	full := Config{AllowOrigins: []string{"https://www.foo.com"}, AllowMethods: []string{"GET", "OPTIONS"},
		AllowHeaders: []string{"x-header-1", "x-header-2"}, ExposeHeaders: []string{"x-header-3"}, AllowCredentials: true, MaxAge: 3600}
	wild := Config{AllowOrigins: []string{"*"}, AllowMethods: []string{"*"}, AllowHeaders: []string{"*"}}
	wildCreds := wild
	wildCreds.AllowCredentials = true
	for _, tt := range []struct {
		name           string
		config         Config
		origin, method string
		reqHeaders     string
		want           map[string]string // "" means absent
	}{
		{"allowed origin gets every header", full, "https://www.foo.com", "GET", "x-header-1",
			map[string]string{hAllowOrigin: "https://www.foo.com", hAllowMethods: "GET, OPTIONS", hAllowHeaders: "x-header-1, x-header-2",
				hExposeHeaders: "x-header-3", hMaxAge: "3600", hAllowCreds: "true"}},
		{"other origin gets none", full, "https://foobar.com", "GET", "",
			map[string]string{hAllowOrigin: "", hAllowMethods: "", hMaxAge: "", hAllowCreds: ""}},
		{"wildcards without credentials are *", wild, "https://a.example", "PUT", "x-a, x-b",
			map[string]string{hAllowOrigin: "*", hAllowMethods: "*", hAllowHeaders: "*", hAllowCreds: "", hMaxAge: "5"}},
		{"wildcards with credentials echo", wildCreds, "https://a.example", "PUT", "x-a, x-b",
			map[string]string{hAllowOrigin: "https://a.example", hAllowMethods: "PUT", hAllowHeaders: "x-a, x-b", hAllowCreds: "true"}},
		{"wildcard headers with credentials and none asked", wildCreds, "https://a.example", "PUT", "",
			map[string]string{hAllowHeaders: ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, proceed := preflight(newCORS(t, tt.config), tt.origin, tt.method, tt.reqHeaders)
			if proceed {
				t.Fatal("a preflight went upstream")
			}
			if w.Code != http.StatusNoContent {
				t.Errorf("status %d, want 204", w.Code)
			}
			for k, v := range tt.want {
				if got := strings.Join(w.Header().Values(k), ","); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if !strings.Contains(w.Header().Get("Vary"), "Origin") {
				t.Errorf("Vary = %q, want Origin in it", w.Header().Get("Vary"))
			}
		})
	}
}

func TestNotPreflight(t *testing.T) {
	c := newCORS(t, Config{AllowOrigins: []string{"*"}})
	for _, tt := range []struct {
		name, method, origin, reqMethod string
	}{
		{"OPTIONS without Access-Control-Request-Method", http.MethodOptions, "https://a.example", ""},
		{"OPTIONS without Origin", http.MethodOptions, "", "GET"},
		{"GET with both", http.MethodGet, "https://a.example", "GET"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "/", nil)
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if tt.reqMethod != "" {
				r.Header.Set("Access-Control-Request-Method", tt.reqMethod)
			}
			if !c.FilterRequest(httptest.NewRecorder(), r) {
				t.Error("answered by the filter, want it sent upstream")
			}
		})
	}
}

func TestActualResponse(t *testing.T) {
	for _, tt := range []struct {
		name   string
		config Config
		origin string
		up     http.Header // what the upstream answered
		want   map[string]string
	}{
		{"allowed origin, credentials, expose", Config{AllowOrigins: []string{"https://*.foo.com"}, AllowCredentials: true, ExposeHeaders: []string{"X-A"}},
			"https://other.foo.com", http.Header{hAllowOrigin: {"https://upstream.example"}, "Vary": {"Accept-Encoding"}},
			map[string]string{hAllowOrigin: "https://other.foo.com", hAllowCreds: "true", hExposeHeaders: "X-A", "Vary": "Accept-Encoding,Origin"}},
		{"other origin: nothing but Vary", Config{AllowOrigins: []string{"https://www.foo.com"}}, "https://foobar.com", http.Header{},
			map[string]string{hAllowOrigin: "", hAllowCreds: "", "Vary": "Origin"}},
		{"any origin without credentials is *, no Vary", Config{AllowOrigins: []string{"*"}}, "https://foobar.com:12345", http.Header{},
			map[string]string{hAllowOrigin: "*", hAllowCreds: "", "Vary": ""}},
		{"expose * with credentials lists the response's headers", Config{AllowOrigins: []string{"*"}, AllowCredentials: true, ExposeHeaders: []string{"*"}},
			"https://a.example", http.Header{"X-B": {"1"}, "X-A": {"2"}, "Content-Type": {"text/plain"}},
			map[string]string{hAllowOrigin: "https://a.example", hExposeHeaders: "X-A, X-B"}},
		{"an upstream's Vary: Origin is not repeated", Config{AllowOrigins: []string{"https://a.example"}}, "https://a.example", http.Header{"Vary": {"origin"}},
			map[string]string{"Vary": "origin"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newCORS(t, tt.config)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Origin", tt.origin)
			c.FilterResponse(r, http.StatusOK, tt.up)
			for k, v := range tt.want {
				if got := strings.Join(tt.up.Values(k), ","); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestSharedValues: the values the filter shares across responses are never appended into.
func TestSharedValues(t *testing.T) {
	c := newCORS(t, Config{AllowOrigins: []string{"https://a.example"}})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Origin", "https://a.example")
	h1 := http.Header{}
	c.FilterResponse(r, 200, h1)
	h1.Add("Vary", "Accept")
	h2 := http.Header{}
	c.FilterResponse(r, 200, h2)
	if got := h2.Values("Vary"); len(got) != 1 || got[0] != "Origin" {
		t.Errorf("second response Vary = %q, want [Origin]", got)
	}
}

func TestInvalidConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    Config
		want string
	}{
		{"* with other origins", Config{AllowOrigins: []string{"*", "https://a.example"}}, "cannot be listed"},
		{"origin without scheme", Config{AllowOrigins: []string{"a.example"}}, "is not <scheme>"},
		{"wildcard inside a host", Config{AllowOrigins: []string{"https://a.*.example"}}, "first label"},
		{"* with other methods", Config{AllowMethods: []string{"*", "GET"}}, "cannot be listed"},
		{"bad header", Config{AllowHeaders: []string{"x y"}}, "not a header name"},
		{"negative max age", Config{MaxAge: -1}, "negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := (&CORS{Config: tt.c}).CheckConfig(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckConfig = %v, want %q", err, tt.want)
			}
		})
	}
}

func BenchmarkPreflight(b *testing.B) {
	c := newCORS(b, Config{AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com"}, AllowMethods: []string{"GET", "PUT"},
		AllowHeaders: []string{"x-a"}, AllowCredentials: true})
	r := httptest.NewRequest(http.MethodOptions, "/", nil)
	r.Header.Set("Origin", "https://xpto.www.bar.com")
	r.Header.Set("Access-Control-Request-Method", "PUT")
	w := &headerOnly{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		c.FilterRequest(w, r)
	}
}

func BenchmarkActualResponse(b *testing.B) {
	c := newCORS(b, Config{AllowOrigins: []string{"https://www.foo.com", "https://*.bar.com"}, ExposeHeaders: []string{"X-A"}})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Origin", "https://www.foo.com")
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		c.FilterResponse(r, 200, h)
	}
}

// headerOnly is a ResponseWriter that keeps one header map (a recorder allocates per request).
type headerOnly struct{ h http.Header }

func (w *headerOnly) Header() http.Header         { return w.h }
func (w *headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (w *headerOnly) WriteHeader(int)             {}
