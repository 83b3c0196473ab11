package httproute

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzFirstQueryValue checks the allocation-free scanner against the standard library: for any
// raw query and name, it must find what url.ParseQuery would put first under that name.
func FuzzFirstQueryValue(f *testing.F) {
	for _, seed := range []struct{ q, name string }{
		{"animal=whale", "animal"},
		{"a=1&a=2", "a"},
		{"a%20b=1", "a b"},
		{"a+b=c+d", "a b"},
		{"a=%zz&a=2", "a"},
		{"a=1;b=2&a=3", "a"},
		{"&&a&=x&a=", "a"},
		{"%=1&a=%4", "a"},
		{"a=%41%42", "a"},
	} {
		f.Add(seed.q, seed.name)
	}
	f.Fuzz(func(t *testing.T, q, name string) {
		vals, _ := url.ParseQuery(q)
		want, wantOK := "", false
		if vs := vals[name]; len(vs) > 0 {
			want, wantOK = vs[0], true
		}
		raw, ok := firstQueryValue(q, name)
		if ok != wantOK {
			t.Fatalf("firstQueryValue(%q, %q) found = %v, url.ParseQuery found = %v", q, name, ok, wantOK)
		}
		if !ok {
			return
		}
		got, err := url.QueryUnescape(raw)
		if err != nil || got != want {
			t.Fatalf("firstQueryValue(%q, %q) = %q (unescaped %q, %v), want %q", q, name, raw, got, err, want)
		}
		if !queryUnescapedEqual(raw, want) {
			t.Fatalf("queryUnescapedEqual(%q, %q) = false", raw, want)
		}
	})
}

// FuzzQueryUnescapedEqual checks the streaming comparison against url.QueryUnescape.
func FuzzQueryUnescapedEqual(f *testing.F) {
	f.Add("a+b%20c", "a b c")
	f.Add("%zz", "%zz")
	f.Add("%4", "")
	f.Add("abc", "ab")
	f.Fuzz(func(t *testing.T, s, want string) {
		dec, err := url.QueryUnescape(s)
		expect := err == nil && dec == want
		if got := queryUnescapedEqual(s, want); got != expect {
			t.Fatalf("queryUnescapedEqual(%q, %q) = %v, want %v", s, want, got, expect)
		}
		// The unescaped form of s, when valid, must compare equal to itself.
		if err == nil && !queryUnescapedEqual(s, dec) {
			t.Fatalf("queryUnescapedEqual(%q, %q) = false", s, dec)
		}
	})
}

// FuzzPrefixMatch checks PathPrefix against its definition: the path's elements begin with the
// prefix's elements.
func FuzzPrefixMatch(f *testing.F) {
	f.Add("/abc", "/abc/x")
	f.Add("/abc/", "/abcd")
	f.Add("/", "/")
	f.Fuzz(func(t *testing.T, prefix, path string) {
		if !strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "//") || strings.Contains(prefix, "%") ||
			!strings.HasPrefix(path, "/") {
			return
		}
		m, err := New(Match{Path: &PathMatch{Type: MatchPathPrefix, Value: prefix}})
		if err != nil {
			return
		}
		want := elementsHavePrefix(path, prefix)
		if got := m.path.match(path); got != want {
			t.Fatalf("PathPrefix %q on %q = %v, want %v", prefix, path, got, want)
		}
	})
}

func elementsHavePrefix(path, prefix string) bool {
	pe := strings.Split(strings.Trim(prefix, "/"), "/")
	if len(pe) == 1 && pe[0] == "" {
		return true
	}
	xe := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(xe) < len(pe) {
		return false
	}
	for i := range pe {
		if pe[i] != xe[i] {
			return false
		}
	}
	return true
}
