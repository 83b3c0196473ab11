package compression

import "strings"

// encoding is a content coding the module produces.
type encoding uint8

const (
	identity encoding = iota
	gzipEnc
	brotliEnc
)

// name is the Content-Encoding value of e.
func (e encoding) name() string {
	switch e {
	case gzipEnc:
		return "gzip"
	case brotliEnc:
		return "br"
	}
	return "identity"
}

// negotiate picks the coding for a request's Accept-Encoding field values (RFC 9110 §12.5.3):
// the enabled coding with the highest q-value above 0, brotli on a tie. "x-gzip" is gzip; "*"
// stands for every coding the field does not name; q=0 refuses a coding. A request without
// the field gets identity: most clients that omit it cannot decode anything else. It runs on
// every request: no allocation.
func negotiate(values []string, gzipOn, brotliOn bool) encoding {
	if len(values) == 0 {
		return identity
	}
	qGzip, qBrotli, qStar := -1, -1, -1 // thousandths; -1 is "not named"
	for _, v := range values {
		for v != "" {
			var item string
			item, v, _ = strings.Cut(v, ",")
			coding, params, _ := strings.Cut(item, ";")
			q, ok := qvalue(params)
			if !ok {
				continue // a malformed weight: as if the coding were not named
			}
			switch coding = trimOWS(coding); {
			case strings.EqualFold(coding, "gzip"), strings.EqualFold(coding, "x-gzip"):
				qGzip = max(qGzip, q)
			case strings.EqualFold(coding, "br"):
				qBrotli = max(qBrotli, q)
			case coding == "*":
				qStar = max(qStar, q)
			}
		}
	}
	if qGzip < 0 {
		qGzip = qStar
	}
	if qBrotli < 0 {
		qBrotli = qStar
	}
	if !gzipOn {
		qGzip = 0
	}
	if !brotliOn {
		qBrotli = 0
	}
	switch {
	case qBrotli > 0 && qBrotli >= qGzip:
		return brotliEnc
	case qGzip > 0:
		return gzipEnc
	}
	return identity
}

// qvalue finds the weight among an item's parameters (";q=0.5"), in thousandths; 1000 when
// there is none. ok is false for a weight that is not a qvalue (RFC 9110 §12.4.2).
func qvalue(params string) (q int, ok bool) {
	q = 1000
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		p = trimOWS(p)
		if len(p) < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=' {
			continue
		}
		return parseQ(p[2:])
	}
	return q, true
}

// parseQ parses "0", "0.5", "1.000" and the like.
func parseQ(s string) (int, bool) {
	if s == "" || (s[0] != '0' && s[0] != '1') {
		return 0, false
	}
	whole := int(s[0]-'0') * 1000
	s = s[1:]
	if s == "" {
		return whole, true
	}
	if s[0] != '.' || len(s) > 4 {
		return 0, false
	}
	frac, scale := 0, 100
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		frac += int(c-'0') * scale
		scale /= 10
	}
	if whole == 1000 && frac != 0 {
		return 0, false
	}
	return whole + frac, true
}

// trimOWS trims the optional white space of HTTP fields (spaces and tabs).
func trimOWS(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// hasToken reports whether a comma-separated field (Vary, Cache-Control) names token, ignoring
// case and parameters.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for v != "" {
			var item string
			item, v, _ = strings.Cut(v, ",")
			name, _, _ := strings.Cut(item, "=")
			if strings.EqualFold(trimOWS(name), token) {
				return true
			}
		}
	}
	return false
}
