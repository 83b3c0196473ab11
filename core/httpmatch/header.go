// Package httpmatch holds request-matching pieces shared by the HTTP-shaped route modules
// (route.http, route.grpc), so that both read a header the same way.
package httpmatch

import (
	"net/http"
	"regexp"
	"strings"
)

// Header matches one request header against an exact value or a regular expression. Values of a
// repeated header are compared as their join with Sep (RFC 9110 §5.3: ","; the Cookie header
// joins with "; "). A condition on Host reads r.Host, where Go moves that header.
type Header struct {
	// Key is the canonical header name.
	Key string
	// Sep joins the values of a repeated header.
	Sep string
	// Value is the exact value; used when RE is nil.
	Value string
	// RE, when set, is matched instead of Value.
	RE   *regexp.Regexp
	host bool
}

// NewHeader returns the condition on the header with canonical name key.
func NewHeader(key, sep, value string, re *regexp.Regexp) Header {
	return Header{Key: key, Sep: sep, Value: value, RE: re, host: key == "Host"}
}

// Match reports whether r satisfies the condition; a missing header never does.
func (c *Header) Match(r *http.Request) bool {
	if c.host {
		return r.Host != "" && c.matchOne(r.Host)
	}
	vals := r.Header[c.Key]
	switch len(vals) {
	case 0:
		return false
	case 1:
		return c.matchOne(vals[0])
	}
	if c.RE == nil {
		return equalJoined(vals, c.Sep, c.Value)
	}
	// A repeated header against a regular expression: the one case that pays for a join.
	return c.RE.MatchString(strings.Join(vals, c.Sep))
}

func (c *Header) matchOne(v string) bool {
	if c.RE == nil {
		return v == c.Value
	}
	return c.RE.MatchString(v)
}

// equalJoined reports whether strings.Join(vals, sep) == want, without building the join.
func equalJoined(vals []string, sep, want string) bool {
	for i, v := range vals {
		if i > 0 {
			if !strings.HasPrefix(want, sep) {
				return false
			}
			want = want[len(sep):]
		}
		if !strings.HasPrefix(want, v) {
			return false
		}
		want = want[len(v):]
	}
	return want == ""
}
