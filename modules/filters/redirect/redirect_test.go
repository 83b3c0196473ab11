package redirect

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/pathmod"
)

func newRedirect(t testing.TB, c Config) *Redirect {
	t.Helper()
	f := &Redirect{Config: c}
	if err := f.Provision(nil); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if err := f.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return f
}

func prefix(matched, replace string) *pathmod.Modifier {
	return &pathmod.Modifier{Type: pathmod.ReplacePrefixMatch, MatchedPrefix: matched, ReplacePrefixMatch: replace}
}

func full(p string) *pathmod.Modifier {
	return &pathmod.Modifier{Type: pathmod.ReplaceFullPath, ReplaceFullPath: p}
}

// Listener configs as the translator fills them in for the conformance Gateways.
var (
	http80   = Config{ListenerPort: 80, ListenerScheme: "http"}
	http8080 = Config{ListenerPort: 8080, ListenerScheme: "http"}
	https443 = Config{ListenerPort: 443, ListenerScheme: "https"}
)

func with(base Config, edit func(*Config)) Config {
	edit(&base)
	return base
}

type redirectCase struct {
	name   string
	config Config
	target string // request path and query
	host   string // request Host
	tls    bool
	status int
	want   string // Location
}

// TestConformance replays the redirect conformance tests (httproute-redirect-path, -port,
// -scheme, -port-and-scheme, -host-and-status, 303/307/308) against the filter. The conformance
// suite only compares the parts it names; these cases pin the whole Location.
func TestConformance(t *testing.T) {
	tests := []redirectCase{
		// httproute-redirect-path
		{"path: replace prefix", with(http80, func(c *Config) { c.Path = prefix("/original-prefix", "/replacement-prefix") }),
			"/original-prefix/lemon", "gw.example", false, 302, "http://gw.example/replacement-prefix/lemon"},
		{"path: replace full path", with(http80, func(c *Config) { c.Path = full("/full-path-replacement") }),
			"/full/path/original", "gw.example", false, 302, "http://gw.example/full-path-replacement"},
		{"path: prefix and host", with(http80, func(c *Config) {
			c.Hostname = "example.org"
			c.Path = prefix("/path-and-host", "/replacement-prefix")
		}), "/path-and-host", "gw.example", false, 302, "http://example.org/replacement-prefix"},
		{"path: prefix and status", with(http80, func(c *Config) {
			c.StatusCode = 301
			c.Path = prefix("/path-and-status", "/replacement-prefix")
		}), "/path-and-status", "gw.example", false, 301, "http://gw.example/replacement-prefix"},
		{"path: full path and host", with(http80, func(c *Config) { c.Hostname = "example.org"; c.Path = full("/replacement-full") }),
			"/full-path-and-host", "gw.example", false, 302, "http://example.org/replacement-full"},
		{"path: full path and status", with(http80, func(c *Config) { c.StatusCode = 301; c.Path = full("/replacement-full") }),
			"/full-path-and-status", "gw.example", false, 301, "http://gw.example/replacement-full"},

		// httproute-redirect-port
		{"port", with(http80, func(c *Config) { c.Port = 8083 }),
			"/port", "gw.example", false, 302, "http://gw.example:8083/port"},
		{"port and host", with(http80, func(c *Config) { c.Port = 8083; c.Hostname = "example.org" }),
			"/port-and-host", "gw.example", false, 302, "http://example.org:8083/port-and-host"},
		{"port and status", with(http80, func(c *Config) { c.Port = 8083; c.StatusCode = 301 }),
			"/port-and-status", "gw.example", false, 301, "http://gw.example:8083/port-and-status"},

		// httproute-redirect-scheme
		{"scheme", with(http80, func(c *Config) { c.Scheme = "https" }),
			"/scheme", "gw.example", false, 302, "https://gw.example/scheme"},
		{"scheme and host", with(http80, func(c *Config) { c.Scheme = "https"; c.Hostname = "example.org" }),
			"/scheme-and-host", "gw.example", false, 302, "https://example.org/scheme-and-host"},
		{"scheme and status", with(http80, func(c *Config) { c.Scheme = "https"; c.StatusCode = 301 }),
			"/scheme-and-status", "gw.example", false, 301, "https://gw.example/scheme-and-status"},

		// httproute-redirect-host-and-status
		{"hostname", with(http80, func(c *Config) { c.Hostname = "example.org" }),
			"/hostname-redirect", "gw.example", false, 302, "http://example.org/hostname-redirect"},
		{"host and status", with(http80, func(c *Config) { c.Hostname = "example.org"; c.StatusCode = 301 }),
			"/host-and-status", "gw.example", false, 301, "http://example.org/host-and-status"},

		// httproute-redirect-port-and-scheme, listener on 80
		{"80: scheme nil, port nil", with(http80, func(c *Config) { c.Hostname = "example.org" }),
			"/scheme-nil-and-port-nil", "gw.example:80", false, 302, "http://example.org/scheme-nil-and-port-nil"},
		{"80: scheme nil, port 80", with(http80, func(c *Config) { c.Hostname = "example.org"; c.Port = 80 }),
			"/scheme-nil-and-port-80", "gw.example:80", false, 302, "http://example.org/scheme-nil-and-port-80"},
		{"80: scheme https, port nil", with(http80, func(c *Config) { c.Hostname = "example.org"; c.Scheme = "https" }),
			"/scheme-https-and-port-nil", "gw.example:80", false, 302, "https://example.org/scheme-https-and-port-nil"},
		{"80: scheme https, port 443", with(http80, func(c *Config) { c.Hostname = "example.org"; c.Scheme = "https"; c.Port = 443 }),
			"/scheme-https-and-port-443", "gw.example:80", false, 302, "https://example.org/scheme-https-and-port-443"},
		{"80: scheme https, port 8443", with(http80, func(c *Config) { c.Hostname = "example.org"; c.Scheme = "https"; c.Port = 8443 }),
			"/scheme-https-and-port-8443", "gw.example:80", false, 302, "https://example.org:8443/scheme-https-and-port-8443"},

		// listener on 8080
		{"8080: scheme nil, port nil keeps the listener port", with(http8080, func(c *Config) { c.Hostname = "example.org" }),
			"/scheme-nil-and-port-nil", "gw.example:8080", false, 302, "http://example.org:8080/scheme-nil-and-port-nil"},
		{"8080: scheme nil, port 80", with(http8080, func(c *Config) { c.Hostname = "example.org"; c.Port = 80 }),
			"/scheme-nil-and-port-80", "gw.example:8080", false, 302, "http://example.org/scheme-nil-and-port-80"},
		{"8080: scheme https, port nil", with(http8080, func(c *Config) { c.Hostname = "example.org"; c.Scheme = "https" }),
			"/scheme-https-and-port-nil", "gw.example:8080", false, 302, "https://example.org/scheme-https-and-port-nil"},

		// listener on 443 (TLS)
		{"443: scheme nil, port nil", with(https443, func(c *Config) { c.Hostname = "example.org" }),
			"/scheme-nil-and-port-nil", "example.org", true, 302, "https://example.org/scheme-nil-and-port-nil"},
		{"443: scheme nil, port 443", with(https443, func(c *Config) { c.Hostname = "example.org"; c.Port = 443 }),
			"/scheme-nil-and-port-443", "example.org", true, 302, "https://example.org/scheme-nil-and-port-443"},
		{"443: scheme nil, port 8443", with(https443, func(c *Config) { c.Hostname = "example.org"; c.Port = 8443 }),
			"/scheme-nil-and-port-8443", "example.org", true, 302, "https://example.org:8443/scheme-nil-and-port-8443"},
		{"443: scheme http, port nil", with(https443, func(c *Config) { c.Hostname = "example.org"; c.Scheme = "http" }),
			"/scheme-http-and-port-nil", "example.org", true, 302, "http://example.org/scheme-http-and-port-nil"},
		{"443: scheme http, port 80", with(https443, func(c *Config) { c.Hostname = "example.org"; c.Scheme = "http"; c.Port = 80 }),
			"/scheme-http-and-port-80", "example.org", true, 302, "http://example.org/scheme-http-and-port-80"},
		{"443: scheme http, port 8080", with(https443, func(c *Config) { c.Hostname = "example.org"; c.Scheme = "http"; c.Port = 8080 }),
			"/scheme-http-and-port-8080", "example.org", true, 302, "http://example.org:8080/scheme-http-and-port-8080"},

		// httproute-303/307/308-redirect
		{"303", with(http80, func(c *Config) { c.StatusCode = 303 }), "/x", "gw.example", false, 303, "http://gw.example/x"},
		{"307", with(http80, func(c *Config) { c.StatusCode = 307 }), "/x", "gw.example", false, 307, "http://gw.example/x"},
		{"308", with(http80, func(c *Config) { c.StatusCode = 308 }), "/x", "gw.example", false, 308, "http://gw.example/x"},
	}
	runCases(t, tests)
}

// TestLocation covers what the conformance suite does not: queries, escapes, IPv6, missing Host,
// and the fallbacks when the listener is unknown.
func TestLocation(t *testing.T) {
	tests := []redirectCase{
		{"query string is preserved", with(http80, func(c *Config) { c.Scheme = "https" }),
			"/a?x=1&y=%20", "gw.example", false, 302, "https://gw.example/a?x=1&y=%20"},
		{"query preserved with a path rewrite", with(http80, func(c *Config) { c.Path = prefix("/a", "/b") }),
			"/a/c?q=1", "gw.example", false, 302, "http://gw.example/b/c?q=1"},
		{"escaped path is kept escaped", http80, "/a%20b/c%2Fd", "gw.example", false, 302, "http://gw.example/a%20b/c%2Fd"},
		{"prefix rewrite keeps escapes in the rest", with(http80, func(c *Config) { c.Path = prefix("/a", "/b") }),
			"/a/c%2Fd", "gw.example", false, 302, "http://gw.example/b/c%2Fd"},
		{"prefix slash prepends", with(http80, func(c *Config) { c.Path = prefix("/", "/new") }),
			"/x/y", "gw.example", false, 302, "http://gw.example/new/x/y"},
		{"strip prefix to root", with(http80, func(c *Config) { c.Path = prefix("/strip", "/") }),
			"/strip", "gw.example", false, 302, "http://gw.example/"},
		{"unknown listener keeps the Host port", Config{Hostname: "example.org"},
			"/x", "gw.example:8080", false, 302, "http://example.org:8080/x"},
		{"unknown listener, Host without port", Config{Hostname: "example.org"},
			"/x", "gw.example", false, 302, "http://example.org/x"},
		{"unknown listener, TLS Host port 443 omitted", Config{},
			"/x", "gw.example:443", true, 302, "https://gw.example/x"},
		{"listener port beats the Host port", with(http8080, func(c *Config) {}),
			"/x", "gw.example:30080", false, 302, "http://gw.example:8080/x"},
		{"listener scheme when the connection says nothing", Config{ListenerScheme: "https", ListenerPort: 443},
			"/x", "gw.example", false, 302, "https://gw.example/x"},
		{"IPv6 Host keeps brackets", with(http8080, func(c *Config) {}),
			"/x", "[::1]:8080", false, 302, "http://[::1]:8080/x"},
		{"IPv6 Host without port", Config{Port: 8080},
			"/x", "[::1]", false, 302, "http://[::1]:8080/x"},
		{"IPv6 configured hostname is bracketed", with(http80, func(c *Config) { c.Hostname = "::1" }),
			"/x", "gw.example", false, 302, "http://[::1]/x"},
		{"no Host gives a relative redirect", with(http80, func(c *Config) { c.Path = full("/y") }),
			"/x?a", "", false, 302, "/y?a"},
	}
	runCases(t, tests)
}

func runCases(t *testing.T, tests []redirectCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRedirect(t, tt.config)
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			r.Host = tt.host
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			w := httptest.NewRecorder()
			if f.FilterRequest(w, r) {
				t.Fatal("FilterRequest proceeded; a redirect must stop the chain")
			}
			if w.Code != tt.status {
				t.Errorf("status = %d, want %d", w.Code, tt.status)
			}
			if got := w.Header().Get("Location"); got != tt.want {
				t.Errorf("Location = %q, want %q", got, tt.want)
			}
			if w.Body.Len() != 0 {
				t.Errorf("body = %q, want none", w.Body.String())
			}
		})
	}
}

// TestOverRealConnection serves the filter on loopback, over TLS, and checks what a client that
// does not follow redirects receives: the scheme comes from the connection and the port from the
// Host the client sent.
func TestOverRealConnection(t *testing.T) {
	f := newRedirect(t, Config{Path: prefix("/old", "/new"), StatusCode: http.StatusPermanentRedirect})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.FilterRequest(w, r) {
			t.Error("FilterRequest proceeded")
		}
	}))
	t.Cleanup(srv.Close)
	client := srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	resp, err := client.Get(srv.URL + "/old/page?x=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusPermanentRedirect {
		t.Errorf("status = %d", resp.StatusCode)
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := "https://" + u.Host + "/new/page?x=1"
	if got := resp.Header.Get("Location"); got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
}

func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		config Config
		want   string
	}{
		{"status 200", Config{StatusCode: 200}, "unsupported status code"},
		{"status 304", Config{StatusCode: 304}, "unsupported status code"},
		{"scheme ftp", Config{Scheme: "ftp"}, "unsupported scheme"},
		{"listener scheme tcp", Config{ListenerScheme: "tcp"}, "unsupported listenerScheme"},
		{"hostname with slash", Config{Hostname: "a/b"}, "invalid hostname"},
		{"port out of range", Config{Port: 70000}, "out of range"},
		{"bad path modifier", Config{Path: &pathmod.Modifier{Type: "Regex"}}, "unsupported path modifier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Redirect{Config: tt.config}
			err := f.Provision(nil)
			if err == nil {
				err = f.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	reg := core.NewRegistry((*Redirect)(nil))
	bc := core.NewBuildContext(context.Background(), nil, reg, nil)
	t.Cleanup(func() { _ = bc.Close() })
	if _, err := core.Load[core.HTTPRequestFilter](bc, core.MustConfig(ModuleID, Config{Scheme: "https", StatusCode: 301})); err != nil {
		t.Errorf("Load: %v", err)
	}
	if _, err := core.Load[core.HTTPRequestFilter](bc, core.MustConfig(ModuleID, Config{StatusCode: 200})); err == nil {
		t.Error("Load accepted status 200")
	}
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Errorf("%s is not registered", ModuleID)
	}
}

// discardWriter is a ResponseWriter that keeps one header map, so the benchmark measures the
// filter rather than a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

func BenchmarkRedirect(b *testing.B) {
	f := newRedirect(b, Config{Scheme: "https", ListenerPort: 80, ListenerScheme: "http", Path: prefix("/old", "/new")})
	r := httptest.NewRequest(http.MethodGet, "/old/page?x=1", nil)
	r.Host = "gw.example"
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		f.FilterRequest(w, r)
	}
}

func BenchmarkRedirectSchemeOnly(b *testing.B) {
	f := newRedirect(b, Config{Scheme: "https", StatusCode: 301})
	r := httptest.NewRequest(http.MethodGet, "/some/path?x=1", nil)
	r.Host = "gw.example:8080"
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		f.FilterRequest(w, r)
	}
}
