package httproute

import (
	"net/url"
	"strings"
)

func (c *queryCond) match(rawQuery string) bool {
	v, ok := firstQueryValue(rawQuery, c.name)
	if !ok {
		return false
	}
	if c.re == nil {
		return queryUnescapedEqual(v, c.value)
	}
	if strings.IndexByte(v, '%') < 0 && strings.IndexByte(v, '+') < 0 {
		return c.re.MatchString(v)
	}
	s, err := url.QueryUnescape(v)
	return err == nil && c.re.MatchString(s)
}

// firstQueryValue returns the still-escaped value of the first pair in rawQuery whose decoded name
// is name, skipping the pairs url.ParseQuery skips (those containing ';', and those with a bad
// escape in the name or value). So, decoded, it is r.URL.Query().Get(name), without the map.
func firstQueryValue(rawQuery, name string) (string, bool) {
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" || strings.IndexByte(pair, ';') >= 0 {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if !queryUnescapedEqual(k, name) || !validQueryEscapes(v) {
			continue
		}
		return v, true
	}
	return "", false
}

// queryUnescapedEqual reports whether the query component s, once unescaped ('+' is a space), is
// want. A badly escaped s equals nothing.
func queryUnescapedEqual(s, want string) bool {
	j := 0
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch b {
		case '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			b = unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
		case '+':
			b = ' '
		}
		if j >= len(want) || want[j] != b {
			return false
		}
		j++
	}
	return j == len(want)
}

// validQueryEscapes reports whether every '%' in s starts a two-digit hex escape.
func validQueryEscapes(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; {
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return false
		}
		next := strings.IndexByte(s[i+3:], '%')
		if next < 0 {
			break
		}
		i += 3 + next
	}
	return true
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
