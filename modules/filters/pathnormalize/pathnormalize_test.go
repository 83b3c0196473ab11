package pathnormalize_test

import (
	"net/http/httptest"
	"testing"

	"github.com/coxswain-labs/coxswain/modules/filters/pathnormalize"
)

func TestNormalize(t *testing.T) {
	cases := []struct{ mode, in, want string }{
		{"base", "/a/b", "/a/b"},
		{"base", "/a/./b/../c", "/a/c"},
		{"base", "/a/%2e%2E/b", "/b"},
		{"base", "/../../x", "/x"},
		{"base", "/a/..", "/"},
		{"base", "/a/.", "/a/"},
		{"base", "/%7euser/%41", "/~user/A"},
		{"base", "/a%2fb/%5c", "/a%2Fb/%5C"},   // never decoded in base
		{"base", "/a%2F..%2Fb", "/a%2F..%2Fb"}, // one segment: nothing to remove
		{"base", "//a//b", "//a//b"},
		{"base", "/%e2%82%ac", "/%E2%82%AC"},
		{"merge-slashes", "//a///b/", "/a/b/"},
		{"merge-slashes", "/a%2F%2Fb", "/a%2F%2Fb"},
		{"merge-slashes", "//a/..//b", "/b"},
		{"decode-and-merge-slashes", "/a%2F..%2Fb", "/b"},
		{"decode-and-merge-slashes", "/a%5c%5Cb", "/a/b"},
		{"decode-and-merge-slashes", `/a\..\b`, "/b"},
	}
	for _, c := range cases {
		got, changed := pathnormalize.Normalize(c.mode, c.in)
		if got != c.want || changed != (c.in != c.want) {
			t.Errorf("%s %q: %q (changed %v), want %q", c.mode, c.in, got, changed, c.want)
		}
	}
}

func TestFilterRewritesPath(t *testing.T) {
	f := &pathnormalize.Filter{Config: pathnormalize.Config{Mode: "merge-slashes"}}
	if err := f.Provision(nil); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/a//b%2Fc/../d?q=1", nil)
	f.FilterRequest(nil, r)
	if r.URL.Path != "/a/d" || r.URL.RawQuery != "q=1" {
		t.Errorf("path %q raw %q query %q", r.URL.Path, r.URL.RawPath, r.URL.RawQuery)
	}
	r = httptest.NewRequest("GET", "/x%2Fy//z", nil)
	f.FilterRequest(nil, r)
	if r.URL.Path != "/x/y/z" || r.URL.EscapedPath() != "/x%2Fy/z" {
		t.Errorf("path %q escaped %q", r.URL.Path, r.URL.EscapedPath())
	}
	if (&pathnormalize.Filter{Config: pathnormalize.Config{Mode: "full"}}).Provision(nil) == nil {
		t.Error("unknown mode accepted")
	}
}

func TestNormalPathDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { pathnormalize.Normalize("merge-slashes", "/api/v1/users/42") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
