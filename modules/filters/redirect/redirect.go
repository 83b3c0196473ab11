// Package redirect is Gateway API's RequestRedirect filter, "filter.http.request_redirect": it
// answers the request with a 3xx whose Location is the request's URL with the configured parts
// replaced, and stops the chain.
package redirect

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/pathmod"
)

func init() {
	core.RegisterModule((*Redirect)(nil))
}

var (
	_ core.HTTPRequestFilter = (*Redirect)(nil)
	_ core.Provisioner       = (*Redirect)(nil)
	_ core.Validator         = (*Redirect)(nil)
)

// Redirect is the filter.http.request_redirect module.
type Redirect struct {
	Config

	status int
	// host is the configured hostname as it goes in a URL (an IPv6 literal bracketed).
	host string
	// port is the fixed port of the Location, or 0 when it depends on the request (see portFor).
	port uint32
	path *pathmod.Rewriter
}

// CoxswainModule implements core.Module.
func (*Redirect) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Redirect) }}
}

// Provision precomputes the parts of the Location that do not depend on the request.
func (f *Redirect) Provision(_ *core.BuildContext) error {
	f.status = f.StatusCode
	if f.status == 0 {
		f.status = http.StatusFound
	}
	f.host = f.Hostname
	if strings.IndexByte(f.host, ':') >= 0 && !strings.HasPrefix(f.host, "[") {
		f.host = "[" + f.host + "]"
	}
	// The spec's port rules, the parts known now: an explicit port wins; an explicit scheme
	// without a port means that scheme's well-known port; otherwise the Gateway listener's port.
	switch {
	case f.Port != 0:
		f.port = f.Port
	case f.Scheme != "":
		f.port = wellKnownPort(f.Scheme)
	default:
		f.port = f.ListenerPort
	}
	if f.Path != nil {
		rw, err := pathmod.Compile(*f.Path)
		if err != nil {
			return fmt.Errorf("path: %w", err)
		}
		f.path = rw
	}
	return nil
}

// Validate checks the values the API enumerates.
func (f *Redirect) Validate() error {
	switch f.status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return fmt.Errorf("unsupported status code %d (want 301, 302, 303, 307 or 308)", f.StatusCode)
	}
	for _, s := range []struct{ field, v string }{{"scheme", f.Scheme}, {"listenerScheme", f.ListenerScheme}} {
		if s.v != "" && s.v != "http" && s.v != "https" {
			return fmt.Errorf("unsupported %s %q (want http or https)", s.field, s.v)
		}
	}
	if f.Hostname != "" && !httpguts.ValidHostHeader(f.host) {
		return fmt.Errorf("invalid hostname %q", f.Hostname)
	}
	if f.Port > 65535 || f.ListenerPort > 65535 {
		return errors.New("port out of range")
	}
	return nil
}

// FilterRequest writes the redirect and stops the chain.
func (f *Redirect) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	w.Header()["Location"] = []string{f.Location(r)}
	w.WriteHeader(f.status)
	return false
}

// Location is the redirect target for r.
func (f *Redirect) Location(r *http.Request) string {
	scheme := f.Scheme
	if scheme == "" {
		scheme = f.requestScheme(r)
	}
	reqHost, reqPort := splitHostPort(r.Host)
	host := f.host
	if host == "" {
		host = reqHost
	}

	escPath := r.URL.EscapedPath()
	if f.path != nil {
		escPath = pathmod.EscapedPath(f.path.Apply(r.URL.Path, r.URL.RawPath))
	}
	if escPath == "" {
		escPath = "/"
	}

	var portBuf [8]byte
	port := f.portFor(scheme, reqPort, portBuf[:0])

	var b strings.Builder
	b.Grow(len(scheme) + len("://") + len(host) + 1 + len(port) + len(escPath) + 1 + len(r.URL.RawQuery))
	if host != "" {
		// Without any host to name, the best is a relative redirect on the same authority.
		b.WriteString(scheme)
		b.WriteString("://")
		b.WriteString(host)
		if len(port) > 0 {
			b.WriteByte(':')
			b.Write(port)
		}
	}
	b.WriteString(escPath)
	if r.URL.RawQuery != "" {
		b.WriteByte('?')
		b.WriteString(r.URL.RawQuery)
	}
	return b.String()
}

// requestScheme is the scheme the client used: https on a TLS connection; otherwise the listener's
// scheme when the translator said what it is, else http.
func (f *Redirect) requestScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	if f.ListenerScheme != "" {
		return f.ListenerScheme
	}
	return "http"
}

// portFor returns the port digits to put in the Location (appended to buf), or none when the port
// is the scheme's well-known one. Without a configured port, scheme or known listener port, the
// request's own port (from its Host) is kept; a Host without one meant the scheme's default.
func (f *Redirect) portFor(scheme, reqPort string, buf []byte) []byte {
	port := f.port
	if port == 0 {
		if reqPort == "" {
			return nil
		}
		p, err := strconv.ParseUint(reqPort, 10, 16)
		if err != nil {
			return nil
		}
		port = uint32(p)
	}
	if port == wellKnownPort(scheme) {
		return nil
	}
	return strconv.AppendUint(buf, uint64(port), 10)
}

func wellKnownPort(scheme string) uint32 {
	switch scheme {
	case "http":
		return 80
	case "https":
		return 443
	}
	return 0
}

// splitHostPort splits a Host header into host (an IPv6 literal keeps its brackets, ready for a
// URL) and port, without allocating. A malformed port is dropped.
func splitHostPort(hostport string) (host, port string) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return hostport, ""
		}
		host, rest := hostport[:end+1], hostport[end+1:]
		if strings.HasPrefix(rest, ":") {
			port = rest[1:]
		}
		return host, port
	}
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		return hostport, ""
	}
	if strings.IndexByte(hostport[:i], ':') >= 0 {
		// A bare IPv6 address, which a URL must bracket.
		return "[" + hostport + "]", ""
	}
	return hostport[:i], hostport[i+1:]
}
