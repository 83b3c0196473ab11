// Package pathnormalize is the filter.http.path_normalize filter and the normalization it
// applies, which the route.ingress matcher applies too before matching: the path a route matched
// is then the path its filters and the backend see (see modules/httproute's doc on paths). It
// serves an Ingress's path-normalize annotation (docs/ingress.md).
//
// Modes, each including the ones before it:
//
//   - base: RFC 3986 §6.2.2 — percent-encodings of unreserved characters (A-Z a-z 0-9 - . _ ~)
//     are decoded, the others get upper-case hex, and "." and ".." segments are removed
//     (§5.2.4), also when written %2E. %2F and %5C are never decoded: a slash escaped in a
//     segment stays part of that segment.
//   - merge-slashes: and runs of "/" become one.
//   - decode-and-merge-slashes: and %2F and %5C are decoded to "/" first (a backslash separates
//     segments to many backends), so "/a%2F..%2Fb" is "/b".
package pathnormalize

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/coxswain-labs/coxswain/core"
)

// ModuleID is the filter this package registers.
const ModuleID = "filter.http.path_normalize"

// The modes.
const (
	Base                  = "base"
	MergeSlashes          = "merge-slashes"
	DecodeAndMergeSlashes = "decode-and-merge-slashes"
)

func init() { core.RegisterModule((*Filter)(nil)) }

var (
	_ core.HTTPRequestFilter = (*Filter)(nil)
	_ core.Provisioner       = (*Filter)(nil)
)

// Config is the filter's config.
type Config struct {
	Mode string `json:"mode"`
}

// Filter is the module.
type Filter struct {
	Config
}

// CoxswainModule implements core.Module.
func (*Filter) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Filter) }}
}

// Provision checks the mode.
func (f *Filter) Provision(*core.BuildContext) error { return CheckMode(f.Mode) }

// CheckMode reports whether mode is one of the modes.
func CheckMode(mode string) error {
	switch mode {
	case Base, MergeSlashes, DecodeAndMergeSlashes:
		return nil
	}
	return fmt.Errorf("mode %q is not %s, %s or %s", mode, Base, MergeSlashes, DecodeAndMergeSlashes)
}

// FilterRequest rewrites the request's path to its normalized form.
func (f *Filter) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	esc := r.URL.EscapedPath()
	if n, changed := Normalize(f.Mode, esc); changed {
		r.URL.Path, r.URL.RawPath = Split(n)
	}
	return true
}

// Split is the (Path, RawPath) pair of url.URL for the escaped path esc.
func Split(esc string) (path, rawPath string) {
	p, err := url.PathUnescape(esc)
	if err != nil {
		return esc, "" // Normalize leaves only valid escapes; not reached
	}
	if (&url.URL{Path: p}).EscapedPath() == esc {
		return p, ""
	}
	return p, esc
}

// DecodedPath is the decoded form of the normalized esc and whether it differs from esc's
// decoded form (which the caller has, as r.URL.Path). It allocates only for a path that changes.
func DecodedPath(mode, esc string) (string, bool) {
	n, changed := Normalize(mode, esc)
	if !changed {
		return "", false
	}
	p, _ := Split(n)
	return p, true
}

// Normalize returns the escaped path esc normalized by mode, and whether it changed. A path
// that needs nothing is returned as it is, without allocating.
func Normalize(mode, esc string) (string, bool) {
	if !needsWork(mode, esc) {
		return esc, false
	}
	merge := mode != Base
	decodeSlashes := mode == DecodeAndMergeSlashes
	var b strings.Builder
	b.Grow(len(esc))
	for i := 0; i < len(esc); i++ {
		c := esc[i]
		if c == '%' && i+2 < len(esc) && isHex(esc[i+1]) && isHex(esc[i+2]) {
			d := unhex(esc[i+1])<<4 | unhex(esc[i+2])
			switch {
			case unreserved(d):
				b.WriteByte(d)
			case decodeSlashes && (d == '/' || d == '\\'):
				b.WriteByte('/')
			default:
				b.WriteByte('%')
				b.WriteByte(upper(esc[i+1]))
				b.WriteByte(upper(esc[i+2]))
			}
			i += 2
			continue
		}
		if decodeSlashes && c == '\\' {
			c = '/'
		}
		b.WriteByte(c)
	}
	out := b.String()
	if merge {
		for strings.Contains(out, "//") {
			out = strings.ReplaceAll(out, "//", "/")
		}
	}
	out = removeDotSegments(out)
	return out, out != esc
}

// needsWork is a quick scan for anything Normalize could change.
func needsWork(mode, esc string) bool {
	for i := 0; i < len(esc); i++ {
		switch esc[i] {
		case '%':
			return true
		case '\\':
			if mode == DecodeAndMergeSlashes {
				return true
			}
		case '/':
			if i+1 < len(esc) && (esc[i+1] == '.' || (esc[i+1] == '/' && mode != Base)) {
				return true
			}
		}
	}
	return false
}

// removeDotSegments is RFC 3986 §5.2.4 on a path that begins with "/".
func removeDotSegments(p string) string {
	if !strings.Contains(p, "/.") {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch s {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	r := strings.Join(out, "/")
	if r == "" || r[0] != '/' {
		r = "/" + r
	}
	return r
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'f' {
		return c - 'a' + 'A'
	}
	return c
}
