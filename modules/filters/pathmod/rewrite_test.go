package pathmod

import (
	"net/url"
	"strings"
	"testing"
)

func TestHasPrefix(t *testing.T) {
	tests := []struct {
		prefix, path string
		want         bool
	}{
		{"/abc", "/abc", true},
		{"/abc", "/abc/", true},
		{"/abc", "/abc/x", true},
		{"/abc", "/abcd", false},
		{"/abc/", "/abc", true},
		{"/abc/", "/abc/x", true},
		{"/abc/", "/abcd", false},
		{"/", "/", true},
		{"/", "/anything", true},
		{"/a/b", "/a", false},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+" on "+tt.path, func(t *testing.T) {
			if got := HasPrefix(tt.path, TrimPrefix(tt.prefix)); got != tt.want {
				t.Errorf("HasPrefix(%q, TrimPrefix(%q)) = %v, want %v", tt.path, tt.prefix, got, tt.want)
			}
		})
	}
}

// TestReplacePrefixMatchSpecTable is the table in the Gateway API documentation of
// HTTPPathModifier.ReplacePrefixMatch, row by row, plus the conformance cases.
func TestReplacePrefixMatchSpecTable(t *testing.T) {
	tests := []struct {
		name                  string
		path, prefix, replace string
		want                  string
	}{
		{"spec: /foo/bar, /foo, /xyz", "/foo/bar", "/foo", "/xyz", "/xyz/bar"},
		{"spec: /foo/bar, /foo, /xyz/", "/foo/bar", "/foo", "/xyz/", "/xyz/bar"},
		{"spec: /foo/bar, /foo/, /xyz", "/foo/bar", "/foo/", "/xyz", "/xyz/bar"},
		{"spec: /foo/bar, /foo/, /xyz/", "/foo/bar", "/foo/", "/xyz/", "/xyz/bar"},
		{"spec: /foo, /foo, /xyz", "/foo", "/foo", "/xyz", "/xyz"},
		{"spec: /foo/, /foo, /xyz", "/foo/", "/foo", "/xyz", "/xyz/"},
		{"spec: /foo/bar, /foo, empty", "/foo/bar", "/foo", "", "/bar"},
		{"spec: /foo/, /foo, empty", "/foo/", "/foo", "", "/"},
		{"spec: /foo, /foo, empty", "/foo", "/foo", "", "/"},
		{"spec: /foo/, /foo, /", "/foo/", "/foo", "/", "/"},
		{"spec: /foo, /foo, /", "/foo", "/foo", "/", "/"},
		{"conformance rewrite-path: prefix/one", "/prefix/one/two", "/prefix/one", "/one", "/one/two"},
		{"conformance rewrite-path: strip-prefix child", "/strip-prefix/three", "/strip-prefix", "/", "/three"},
		{"conformance rewrite-path: strip-prefix bare", "/strip-prefix", "/strip-prefix", "/", "/"},
		{"conformance rewrite-path: modify headers", "/prefix/rewrite-path-and-modify-headers/one", "/prefix/rewrite-path-and-modify-headers", "/prefix", "/prefix/one"},
		{"conformance redirect-path: original-prefix", "/original-prefix/lemon", "/original-prefix", "/replacement-prefix", "/replacement-prefix/lemon"},
		{"conformance redirect-path: path-and-host", "/path-and-host", "/path-and-host", "/replacement-prefix", "/replacement-prefix"},
		{"root prefix prepends the replacement", "/a/b", "/", "/x", "/x/a/b"},
		{"root prefix with empty match prefix", "/a", "", "/x", "/x/a"},
		{"root prefix on root path", "/", "/", "/x", "/x/"},
		{"path without the prefix is kept", "/other", "/foo", "/xyz", "/other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rw, err := Compile(Modifier{Type: ReplacePrefixMatch, ReplacePrefixMatch: tt.replace, MatchedPrefix: tt.prefix})
			if err != nil {
				t.Fatal(err)
			}
			got, raw := rw.Apply(tt.path, "")
			if got != tt.want || raw != "" {
				t.Errorf("Apply(%q) = %q, %q; want %q, \"\"", tt.path, got, raw, tt.want)
			}
		})
	}
}

func TestReplaceFullPath(t *testing.T) {
	rw, err := Compile(Modifier{Type: ReplaceFullPath, ReplaceFullPath: "/full-path-replacement"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/full/path/original", "/", "/a%2Fb"} {
		if got, raw := rw.Apply(p, "/a%2Fb"); got != "/full-path-replacement" || raw != "" {
			t.Errorf("Apply(%q) = %q, %q", p, got, raw)
		}
	}
}

// TestRawPathKept checks that escapes Go would not produce itself ("%2F") survive a rewrite, both
// in the request's remainder and in the configured replacement.
func TestRawPathKept(t *testing.T) {
	tests := []struct {
		name        string
		mod         Modifier
		target      string
		wantPath    string
		wantEscaped string
	}{
		{"encoded slash in the remainder", Modifier{Type: ReplacePrefixMatch, MatchedPrefix: "/api", ReplacePrefixMatch: "/v2"},
			"/api/a%2Fb", "/v2/a/b", "/v2/a%2Fb"},
		{"encoded slash inside the prefix", Modifier{Type: ReplacePrefixMatch, MatchedPrefix: "/a%2Fb", ReplacePrefixMatch: "/x"},
			"/a%2Fb/c%2Fd", "/x/c/d", "/x/c%2Fd"},
		{"encoded slash in the replacement", Modifier{Type: ReplacePrefixMatch, MatchedPrefix: "/api", ReplacePrefixMatch: "/a%2Fb"},
			"/api/c", "/a/b/c", "/a%2Fb/c"},
		{"encoded slash in the full path", Modifier{Type: ReplaceFullPath, ReplaceFullPath: "/a%2Fb"},
			"/x", "/a/b", "/a%2Fb"},
		{"space is escaped normally", Modifier{Type: ReplacePrefixMatch, MatchedPrefix: "/api", ReplacePrefixMatch: "/v2"},
			"/api/a%20b", "/v2/a b", "/v2/a%20b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.target)
			if err != nil {
				t.Fatal(err)
			}
			rw, err := Compile(tt.mod)
			if err != nil {
				t.Fatal(err)
			}
			u.Path, u.RawPath = rw.Apply(u.Path, u.RawPath)
			if u.Path != tt.wantPath || u.EscapedPath() != tt.wantEscaped {
				t.Errorf("got path %q escaped %q; want %q, %q", u.Path, u.EscapedPath(), tt.wantPath, tt.wantEscaped)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		mod  Modifier
		want string
	}{
		{"no type", Modifier{}, "without a type"},
		{"unknown type", Modifier{Type: "ReplaceRegex"}, "unsupported"},
		{"empty full path", Modifier{Type: ReplaceFullPath}, "empty"},
		{"relative full path", Modifier{Type: ReplaceFullPath, ReplaceFullPath: "x"}, "does not start with '/'"},
		{"bad escape", Modifier{Type: ReplacePrefixMatch, ReplacePrefixMatch: "/%zz"}, "invalid URL escape"},
		{"relative matched prefix", Modifier{Type: ReplacePrefixMatch, MatchedPrefix: "x"}, "does not start with '/'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Compile(tt.mod); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Compile error = %v, want %q", err, tt.want)
			}
		})
	}
}

func BenchmarkApplyPrefix(b *testing.B) {
	rw, err := Compile(Modifier{Type: ReplacePrefixMatch, MatchedPrefix: "/api", ReplacePrefixMatch: "/v2"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rw.Apply("/api/users/42", "")
	}
}
