package httproute

import (
	"regexp"
	"testing"
)

// FuzzPathRegex checks a RegularExpression path match as it is compiled for requests (anchored at
// both ends) against the value's own meaning: every value the translator accepts (it compiles)
// compiles here too, and matches a path exactly when the value matches the whole path.
func FuzzPathRegex(f *testing.F) {
	for _, s := range [][2]string{
		{"/a/[0-9]+", "/a/12"}, {"/a|/b", "/b"}, {`/(?i)x`, "/X"}, {`(?m)^/a$`, "/a"}, {`\Q/a\E`, "/a"},
		{`/a\b`, "/a"}, {"", ""}, {"/.*", "/a\nb"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, value, path string) {
		ref, err := regexp.Compile(value)
		if err != nil {
			return // refused by the translator (checkPath)
		}
		m := &Matcher{Path: &PathMatch{Type: MatchRegularExpression, Value: value}}
		if err := m.compilePath(); err != nil {
			t.Fatalf("%q compiles alone but not as a path match: %v", value, err)
		}
		// The longest match at the leftmost position spans the path exactly when some match does.
		ref.Longest()
		loc := ref.FindStringIndex(path)
		want := loc != nil && loc[0] == 0 && loc[1] == len(path)
		if got := m.path.re.MatchString(path); got != want {
			t.Fatalf("value %q, path %q: matched %v, want %v", value, path, got, want)
		}
	})
}
