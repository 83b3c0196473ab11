package console

import (
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	mux := http.NewServeMux()
	Register(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "other", http.StatusTeapot) })
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cases := []struct {
		name, method, path string
		code               int
		ctype              string
	}{
		{"the page", "GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD of the page", "HEAD", "/", 200, "text/html; charset=utf-8"},
		{"script", "GET", "/console/console.js", 200, "text/javascript; charset=utf-8"},
		{"style", "GET", "/console/console.css", 200, "text/css; charset=utf-8"},
		{"icon", "GET", "/console/icon.svg", 200, "image/svg+xml"},
		{"no listing", "GET", "/console/", 404, ""},
		{"no unknown asset", "GET", "/console/nope.js", 404, ""},
		{"index only at /", "GET", "/console/index.html", 404, ""},
		{"other paths stay the mux's", "GET", "/status", http.StatusTeapot, ""},
		{"not a write", "POST", "/", http.StatusTeapot, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != c.code {
				t.Fatalf("%s %s = %d, want %d", c.method, c.path, res.StatusCode, c.code)
			}
			if c.code != 200 {
				return
			}
			if got := res.Header.Get("Content-Type"); got != c.ctype {
				t.Errorf("Content-Type %q, want %q", got, c.ctype)
			}
			csp := res.Header.Get("Content-Security-Policy")
			for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-") {
				t.Errorf("CSP %q allows unsafe sources", csp)
			}
			if res.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no X-Content-Type-Options: nosniff")
			}
		})
	}
}

// TestAssetsSelfContained: the page loads nothing from another origin, has no inline script or
// style (the CSP would block them), every asset it names is embedded, and the script never
// turns API text into markup.
func TestAssetsSelfContained(t *testing.T) {
	page, err := fs.ReadFile(assets, "assets/index.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(string(page), -1) {
		ref := m[1]
		name, ok := strings.CutPrefix(ref, "/console/")
		if !ok {
			t.Errorf("index.html refers to %q, outside /console/", ref)
			continue
		}
		if _, err := fs.Stat(assets, "assets/"+name); err != nil {
			t.Errorf("index.html refers to %q, which is not embedded", ref)
		}
	}
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).Match(page) || strings.Contains(string(page), "<style") ||
		strings.Contains(string(page), " style=") || regexp.MustCompile(`\son[a-z]+=`).Match(page) {
		t.Error("index.html has inline script or style, which the Content-Security-Policy blocks")
	}
	script, err := fs.ReadFile(assets, "assets/console.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(string(script), sink) {
			t.Errorf("console.js uses %s: API text must go through textContent", sink)
		}
	}
}

func TestURL(t *testing.T) {
	for _, c := range []struct{ listen, want string }{
		{"127.0.0.1:9901", "http://127.0.0.1:9901/"},
		{"0.0.0.0:9901", "http://localhost:9901/"},
		{"[::]:9901", "http://localhost:9901/"},
		{"[::1]:9901", "http://[::1]:9901/"},
		{"10.0.0.7:80", "http://10.0.0.7:80/"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.listen)
		if err != nil {
			t.Fatal(err)
		}
		if got := URL(addr); got != c.want {
			t.Errorf("URL(%s) = %q, want %q", c.listen, got, c.want)
		}
	}
}
