package pathmod

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// TrimPrefix is the form of a PathPrefix value that element-wise comparison uses: the value without
// its trailing slashes, so "/abc/" and "/abc" are the same prefix, and "/" becomes "" (which every
// path starts with). Compute it once, at Provision, and pass the result to HasPrefix.
func TrimPrefix(prefix string) string {
	return strings.TrimRight(prefix, "/")
}

// HasPrefix reports whether path starts with the trimmed prefix p (see TrimPrefix) on a path-element
// boundary: p "/abc" matches "/abc", "/abc/" and "/abc/x", but not "/abcd". It is the one definition
// of Gateway API's PathPrefix that both the route.http matcher and ReplacePrefixMatch use, so a
// filter always rewrites exactly the prefix its route matched.
func HasPrefix(path, p string) bool {
	if !strings.HasPrefix(path, p) {
		return false
	}
	return len(path) == len(p) || path[len(p)] == '/'
}

// Rewriter is a compiled Modifier. It works on the decoded path (url.URL.Path), the form routes
// match on, and keeps the escaped form (url.URL.RawPath) consistent with it.
type Rewriter struct {
	full bool
	// prefix is the trimmed, decoded MatchedPrefix (ReplacePrefixMatch only).
	prefix string
	// repl is the decoded replacement: the whole path for ReplaceFullPath, the prefix replacement
	// without trailing slashes for ReplacePrefixMatch. replEsc is its escaped form as configured;
	// replRaw is replEsc when that differs from Go's default escaping of repl ("%2F" must survive),
	// else "", exactly as url.URL keeps RawPath.
	repl    string
	replEsc string
	replRaw string
}

// Compile checks m and precomputes everything Apply needs, so Apply does no parsing.
func Compile(m Modifier) (*Rewriter, error) {
	switch m.Type {
	case ReplaceFullPath:
		if m.ReplaceFullPath == "" {
			return nil, errors.New("replaceFullPath is empty")
		}
		rw, err := newRewriter(m.ReplaceFullPath)
		if err != nil {
			return nil, fmt.Errorf("replaceFullPath: %w", err)
		}
		rw.full = true
		return rw, nil
	case ReplacePrefixMatch:
		prefix := m.MatchedPrefix
		if prefix == "" {
			// A match without a path is PathPrefix "/".
			prefix = "/"
		}
		if prefix[0] != '/' {
			return nil, fmt.Errorf("matchedPrefix %q does not start with '/'", m.MatchedPrefix)
		}
		decPrefix, err := url.PathUnescape(prefix)
		if err != nil {
			return nil, fmt.Errorf("matchedPrefix: %w", err)
		}
		rw, err := newRewriter(TrimPrefix(m.ReplacePrefixMatch))
		if err != nil {
			return nil, fmt.Errorf("replacePrefixMatch: %w", err)
		}
		rw.prefix = TrimPrefix(decPrefix)
		return rw, nil
	case "":
		return nil, errors.New("path modifier without a type")
	default:
		return nil, fmt.Errorf("unsupported path modifier type %q", m.Type)
	}
}

// newRewriter decodes a configured path (escaped, as Gateway API spells it).
func newRewriter(p string) (*Rewriter, error) {
	if p != "" && p[0] != '/' {
		return nil, fmt.Errorf("%q does not start with '/'", p)
	}
	dec, err := url.PathUnescape(p)
	if err != nil {
		return nil, err
	}
	rw := &Rewriter{repl: dec}
	// EscapedPath keeps RawPath when it is a valid encoding of Path, else escapes Path itself.
	rw.replEsc = (&url.URL{Path: dec, RawPath: p}).EscapedPath()
	if rw.replEsc != (&url.URL{Path: dec}).EscapedPath() {
		rw.replRaw = rw.replEsc
	}
	return rw, nil
}

// Apply returns the rewritten Path and RawPath for a request URL with the given Path and RawPath.
// As in url.URL, an empty raw path means "Go's default escaping of the path", which is the common
// case and costs nothing. A path without the matched prefix is returned unchanged; that cannot
// happen for a request the route matched.
//
// ReplacePrefixMatch follows the Gateway API table: the matched prefix and the replacement are
// compared without trailing slashes, the rest of the path (which starts with "/" or is empty) is
// kept, and an empty result becomes "/". So "/foo/" with prefix "/foo" and replacement "/xyz"
// becomes "/xyz/", and "/foo" with replacement "/" becomes "/".
func (rw *Rewriter) Apply(path, rawPath string) (newPath, newRawPath string) {
	if rw.full {
		return rw.repl, rw.replRaw
	}
	if !HasPrefix(path, rw.prefix) {
		return path, rawPath
	}
	rest := path[len(rw.prefix):]
	newPath = join(rw.repl, rest)
	if rawPath == "" && rw.replRaw == "" {
		return newPath, ""
	}
	var restRaw string
	if i := rawIndex(rawPath, len(rw.prefix)); rawPath != "" && i >= 0 {
		restRaw = rawPath[i:]
	} else {
		restRaw = (&url.URL{Path: rest}).EscapedPath()
	}
	return newPath, join(rw.replEsc, restRaw)
}

func join(repl, rest string) string {
	switch {
	case repl == "" && rest == "":
		return "/"
	case rest == "":
		return repl
	case repl == "":
		return rest
	}
	return repl + rest
}

// rawIndex returns the index in the escaped path raw at which its first n decoded bytes end, or -1
// if raw is too short or badly escaped.
func rawIndex(raw string, n int) int {
	i := 0
	for ; n > 0; n-- {
		switch {
		case i >= len(raw):
			return -1
		case raw[i] == '%':
			if i+3 > len(raw) {
				return -1
			}
			i += 3
		default:
			i++
		}
	}
	return i
}

// EscapedPath is the escaped form of a (Path, RawPath) pair, as url.URL.EscapedPath computes it. It
// allocates only when the path has bytes that need escaping and no raw form was kept.
func EscapedPath(path, rawPath string) string {
	u := url.URL{Path: path, RawPath: rawPath}
	return u.EscapedPath()
}
