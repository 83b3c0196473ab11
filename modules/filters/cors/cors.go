// Package cors is Gateway API's CORS filter (GEP-1767), "filter.http.cors". Everything is
// compiled at Provision: origin patterns, and every response header value the config can produce
// as a ready, shared value slice. Per request the filter only compares the Origin with the
// patterns and indexes header maps.
//
//   - A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered by the
//     filter with 204 and never reaches the backend. From an allowed origin it carries
//     Access-Control-Allow-Origin, -Allow-Credentials, -Allow-Methods, -Allow-Headers,
//     -Expose-Headers and -Max-Age; from another origin none of them.
//   - Any other request with an allowed Origin goes upstream as it is, and its response gets
//     Access-Control-Allow-Origin, -Allow-Credentials and -Expose-Headers, replacing what the
//     backend set. The answers the engine makes itself after the filter ran (its errors, a later
//     filter's denial) get the same headers (core.HTTPLocalResponseFilter).
//   - The answers depend on Origin, so every response says Vary: Origin (and a preflight also
//     the two request headers it read), unless it allows any origin without credentials, where
//     the answer is "*" for all.
//
// Wildcards follow the API: "*" in allowOrigins is every origin; with allowCredentials the
// origin is echoed, since "*" would not be honoured. "*" in allowMethods or allowHeaders is
// answered as "*" without credentials and, with them, by echoing what the preflight asked for.
// "*" in exposeHeaders without credentials is "*"; with them it lists the response's own header
// names.
package cors

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
)

func init() { core.RegisterModule((*CORS)(nil)) }

var (
	_ core.HTTPRequestFilter       = (*CORS)(nil)
	_ core.HTTPResponseFilter      = (*CORS)(nil)
	_ core.HTTPLocalResponseFilter = (*CORS)(nil)
	_ core.Provisioner             = (*CORS)(nil)
	_ core.ConfigChecker           = (*CORS)(nil)
)

// Canonical header names.
const (
	hOrigin         = "Origin"
	hRequestMethod  = "Access-Control-Request-Method"
	hRequestHeaders = "Access-Control-Request-Headers"
	hAllowOrigin    = "Access-Control-Allow-Origin"
	hAllowCreds     = "Access-Control-Allow-Credentials"
	hAllowMethods   = "Access-Control-Allow-Methods"
	hAllowHeaders   = "Access-Control-Allow-Headers"
	hExposeHeaders  = "Access-Control-Expose-Headers"
	hMaxAge         = "Access-Control-Max-Age"
	hVary           = "Vary"
)

// CORS is the module.
type CORS struct {
	Config

	anyOrigin bool
	origins   []originPattern
	// Ready values, shared by every response: cap == len, so nobody appends into them.
	star, trueV, maxAge, methods, headers, expose []string
	varyOrigin, varyPreflight                     []string
	echoMethod, echoHeaders, listExposed          bool
}

// CoxswainModule implements core.Module.
func (*CORS) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(CORS) }}
}

// CheckConfig implements core.ConfigChecker.
func (c *CORS) CheckConfig() error { return c.compile() }

// Provision implements core.Provisioner.
func (c *CORS) Provision(*core.BuildContext) error { return c.compile() }

func one(v string) []string { return []string{v} }

func (c *CORS) compile() error {
	c.origins = c.origins[:0]
	for i, o := range c.AllowOrigins {
		if o == "*" {
			if len(c.AllowOrigins) > 1 {
				return fmt.Errorf("allowOrigins[%d]: \"*\" cannot be listed with other origins", i)
			}
			c.anyOrigin = true
			continue
		}
		p, err := compileOrigin(o)
		if err != nil {
			return fmt.Errorf("allowOrigins[%d]: %w", i, err)
		}
		c.origins = append(c.origins, p)
	}
	for i, m := range c.AllowMethods {
		if m == "*" && len(c.AllowMethods) > 1 {
			return fmt.Errorf("allowMethods[%d]: \"*\" cannot be listed with other methods", i)
		}
		if m != "*" && !httpguts.ValidHeaderFieldName(m) { // a method is a token
			return fmt.Errorf("allowMethods[%d]: %q is not a method", i, m)
		}
	}
	for _, l := range []struct {
		name  string
		names []string
	}{{"allowHeaders", c.AllowHeaders}, {"exposeHeaders", c.ExposeHeaders}} {
		for i, h := range l.names {
			if h == "*" && len(l.names) > 1 && l.name == "allowHeaders" {
				return fmt.Errorf("%s[%d]: \"*\" cannot be listed with other headers", l.name, i)
			}
			if h != "*" && !httpguts.ValidHeaderFieldName(h) {
				return fmt.Errorf("%s[%d]: %q is not a header name", l.name, i, h)
			}
		}
	}
	if c.MaxAge < 0 {
		return fmt.Errorf("maxAge %d is negative", c.MaxAge)
	}
	age := c.MaxAge
	if age == 0 {
		age = DefaultMaxAge
	}
	c.star, c.trueV, c.maxAge = one("*"), one("true"), one(strconv.Itoa(int(age)))
	c.varyOrigin = one(hOrigin)
	c.varyPreflight = one(hOrigin + ", " + hRequestMethod + ", " + hRequestHeaders)
	c.methods, c.echoMethod = list(c.AllowMethods, c.AllowCredentials)
	c.headers, c.echoHeaders = list(c.AllowHeaders, c.AllowCredentials)
	c.expose, c.listExposed = list(c.ExposeHeaders, c.AllowCredentials)
	if slices.Contains(c.ExposeHeaders, "*") && len(c.ExposeHeaders) > 1 {
		// "*" among names: without credentials "*" says it all; with them, the names are listed.
		if !c.AllowCredentials {
			c.expose, c.listExposed = one("*"), false
		} else {
			c.expose, c.listExposed = one(joinNames(without(c.ExposeHeaders, "*"))), false
		}
	}
	return nil
}

// list is the response value of a configured list: the names joined, "*" for a wildcard without
// credentials, or (echo) nothing fixed: with credentials a wildcard is answered per request.
func list(names []string, creds bool) (value []string, echo bool) {
	switch {
	case len(names) == 0:
		return nil, false
	case names[0] == "*" && len(names) == 1:
		if creds {
			return nil, true
		}
		return one("*"), false
	}
	return one(joinNames(names)), false
}

func joinNames(names []string) string { return strings.Join(names, ", ") }

func without(names []string, x string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == x })
}

// allowed reports whether origin is allowed. It does not allocate.
func (c *CORS) allowed(origin string) bool {
	if c.anyOrigin {
		return true
	}
	scheme, host, port, ok := splitOrigin(origin)
	if !ok {
		return false
	}
	for i := range c.origins {
		if c.origins[i].match(scheme, host, port) {
			return true
		}
	}
	return false
}

// FilterRequest answers preflights; every other request proceeds.
func (c *CORS) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodOptions {
		return true
	}
	origin, ok := first(r.Header, hOrigin)
	if !ok {
		return true
	}
	method, ok := first(r.Header, hRequestMethod)
	if !ok {
		return true // an ordinary OPTIONS request from a page: the backend answers it
	}
	h := w.Header()
	h[hVary] = c.varyPreflight
	if c.allowed(origin) {
		c.setOrigin(h, origin)
		switch {
		case c.echoMethod:
			h[hAllowMethods] = []string{method}
		case c.methods != nil:
			h[hAllowMethods] = c.methods
		}
		switch reqHeaders := r.Header[hRequestHeaders]; {
		case c.echoHeaders && len(reqHeaders) > 0:
			h[hAllowHeaders] = []string{strings.Join(reqHeaders, ", ")}
		case c.headers != nil:
			h[hAllowHeaders] = c.headers
		}
		if c.expose != nil {
			h[hExposeHeaders] = c.expose
		}
		h[hMaxAge] = c.maxAge
	}
	w.WriteHeader(http.StatusNoContent)
	return false
}

// FilterResponse sets the CORS headers of an allowed origin on the upstream's response,
// replacing the upstream's own.
func (c *CORS) FilterResponse(r *http.Request, _ int, h http.Header) {
	if !c.anyOrigin || c.AllowCredentials {
		addVary(h, c.varyOrigin)
	}
	origin, ok := first(r.Header, hOrigin)
	if !ok || !c.allowed(origin) {
		return
	}
	c.setOrigin(h, origin)
	switch {
	case c.listExposed:
		if v := exposable(h); v != "" {
			h[hExposeHeaders] = []string{v}
		} else {
			delete(h, hExposeHeaders)
		}
	case c.expose != nil:
		h[hExposeHeaders] = c.expose
	}
}

// setOrigin sets Access-Control-Allow-Origin (and -Credentials) for an allowed origin.
func (c *CORS) setOrigin(h http.Header, origin string) {
	if c.anyOrigin && !c.AllowCredentials {
		h[hAllowOrigin] = c.star
	} else {
		h[hAllowOrigin] = []string{origin}
	}
	if c.AllowCredentials {
		h[hAllowCreds] = c.trueV
	} else {
		delete(h, hAllowCreds)
	}
}

// addVary makes h's Vary name Origin, keeping what the upstream varies on.
func addVary(h http.Header, v []string) { h[hVary] = mergeVary(h[hVary], v) }

func mergeVary(have, add []string) []string {
	if len(have) == 0 {
		return add
	}
	for _, line := range have {
		for item := range strings.SplitSeq(line, ",") {
			item = strings.TrimSpace(item)
			if item == "*" || strings.EqualFold(item, hOrigin) {
				return have
			}
		}
	}
	return append(have[:len(have):len(have)], add...)
}

// exposable lists h's header names for "*" in exposeHeaders with credentials, leaving out
// the CORS headers and those always exposed.
func exposable(h http.Header) string {
	names := make([]string, 0, len(h))
	for k := range h {
		switch k {
		case "Cache-Control", "Content-Language", "Content-Length", "Content-Type", "Expires",
			"Last-Modified", "Pragma", hAllowOrigin, hAllowCreds, hExposeHeaders, hVary:
			continue
		}
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// first is the first value of a header, ok false when absent or empty.
func first(h http.Header, key string) (string, bool) {
	vv := h[key]
	if len(vv) == 0 || vv[0] == "" {
		return "", false
	}
	return vv[0], true
}

// FilterLocalResponse implements core.HTTPLocalResponseFilter: the engine's own answers (no
// endpoint, 502, 503, a later filter's denial) carry the same headers as an upstream's, so the
// page can read the error instead of the browser hiding it behind a CORS failure. A preflight's
// answer is the filter's own and is not concerned.
func (c *CORS) FilterLocalResponse(r *http.Request, status int, h http.Header) {
	c.FilterResponse(r, status, h)
}
