package translation

import (
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation"
)

// What the Gateway API CRDs validate with patterns and CEL, for the objects standalone mode reads
// from files (which never met an API server). Route kinds and filter translators share them.

var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+\\-.^_`|~]+$")

// ValidHeaderName reports whether name is an HTTPHeaderName (an RFC 7230 token).
func ValidHeaderName(name string) bool { return headerName.MatchString(name) }

// ValidHostname reports whether h is a PreciseHostname (a DNS-1123 subdomain).
func ValidHostname(h string) bool { return len(validation.IsDNS1123Subdomain(h)) == 0 }
