package translate

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/basicauth"
	"github.com/coxswain-labs/coxswain/modules/filters/clientip"
	"github.com/coxswain-labs/coxswain/modules/filters/pathnormalize"
	"github.com/coxswain-labs/coxswain/modules/filters/pathregex"
	"github.com/coxswain-labs/coxswain/modules/filters/sizelimit"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Prefix begins every annotation this package reads.
const Prefix = "ingress.coxswain-labs.dev/"

// coxswainGroup is the group of the filter objects CR-backed annotations name.
const coxswainGroup = "gateway.coxswain-labs.dev"

// extensionAnnotations name a filter object in the Ingress's namespace, the same object an
// HTTPRoute's ExtensionRef would: one object backs both surfaces. Auth kinds fail closed by
// themselves (a missing object answers 500, see docs/modules.md).
var extensionAnnotations = []struct {
	key, kind string
	auth      bool // fails closed: a missing object answers 503
	// alias is an older name of key, read when key is not set.
	alias string
}{
	{"ip-access-control", "IpAccessControl", false, ""},
	{"rate-limit", "RateLimit", false, ""},
	{"ext-auth", "CoxswainExternalAuth", true, ""},
	{"auth-basic-secret", "BasicAuth", true, "auth-basic"},
	{"auth-jwt", "JwtAuth", true, ""},
	{"compression", "Compression", false, ""},
}

// clientTLSCompanions tune auth-tls-secret (clienttls.go) and mean nothing without it.
var clientTLSCompanions = []string{"auth-tls-verify-depth", "auth-tls-pass-certificate-to-upstream"}

// annotations is what an Ingress's annotations ask of every one of its paths.
type annotations struct {
	useRegex    bool
	timeouts    *irv1.Timeouts
	reqHeader   *gwapiv1.HTTPHeaderFilter
	respHeader  *gwapiv1.HTTPHeaderFilter
	rewrite     string
	redirect    *gwapiv1.HTTPRequestRedirectFilter
	sslCode     int
	sslRedirect bool
	maxBody     string
	retry       *irv1.Retry
	mirror      *gwapiv1.HTTPRequestMirrorFilter
	extensions  []gwapiv1.LocalObjectReference
	// normalize is the path-normalize mode, "" for none.
	normalize string
	// clientIP is what trust-forwarded-for asks (filter.http.client_ip), nil for nothing.
	clientIP *clientip.Config
	// cluster is what load-balance and connect-timeout ask of the backends' clusters.
	cluster translation.ClusterSettings
	// closed is why an auth annotation cannot be served: its object is missing (fail closed).
	closed string
}

// parseAnnotations reads every ingress.coxswain-labs.dev/ annotation. An invalid value is
// reported (a Warning Event on the Ingress) and ignored: fail open.
func parseAnnotations(rc translation.RouteContext, a map[string]string, exists func(kind, name string) bool) *annotations {
	out := &annotations{}
	bad := func(key, format string, args ...any) {
		rc.Warn("metadata.annotations["+Prefix+key+"]", "invalid annotation, ignored: "+format, args...)
	}
	get := func(k string) (string, bool) { v, ok := a[Prefix+k]; return strings.TrimSpace(v), ok }
	if v, ok := get("use-regex"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("use-regex", "%q is not true or false", v)
		}
		out.useRegex = b
	}
	for _, k := range []string{"read-timeout", "send-timeout"} {
		if v, ok := get(k); ok {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				bad(k, "%q is not a positive duration (\"30s\")", v)
				continue
			}
			if out.timeouts == nil {
				out.timeouts = &irv1.Timeouts{}
			}
			ms := uint32(min(d.Milliseconds(), int64(^uint32(0))))
			if k == "read-timeout" {
				out.timeouts.BackendRequestMs = ms
			} else {
				out.timeouts.RequestMs = ms
			}
		}
	}
	if v, ok := get("connect-timeout"); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond || d.Milliseconds() > int64(^uint32(0)) {
			bad("connect-timeout", "%q is not a duration of at least 1ms (\"2s\")", v)
		} else {
			out.cluster.ConnectTimeoutMs = uint32(d.Milliseconds()) //nolint:gosec // bounded above
			out.cluster.ConnectTimeoutField = "metadata.annotations[" + Prefix + "connect-timeout]"
		}
	}
	if v, ok := get("load-balance"); ok && v != "" {
		// The translator checks the algorithm against the build (BackendWith) and warns there.
		out.cluster.Algorithm = v
		out.cluster.AlgorithmField = "metadata.annotations[" + Prefix + "load-balance]"
	}
	out.clientIP = clientIPOf(get, bad)
	if v, ok := get("path-normalize"); ok {
		if err := pathnormalize.CheckMode(v); err != nil {
			bad("path-normalize", "%v", err)
		} else {
			out.normalize = v
		}
	}
	out.reqHeader = headerFilter(get, bad, "request-header")
	out.respHeader = headerFilter(get, bad, "response-header")
	if v, ok := get("rewrite-target"); ok {
		if !strings.HasPrefix(v, "/") {
			bad("rewrite-target", "%q does not begin with \"/\"", v)
		} else {
			out.rewrite = v
		}
	}
	out.redirect = redirectFilter(get, bad)
	if v, ok := get("ssl-redirect"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("ssl-redirect", "%q is not true or false", v)
		}
		out.sslRedirect, out.sslCode = b, http.StatusPermanentRedirect
		if c, ok := get("ssl-redirect-code"); ok {
			n, err := strconv.Atoi(c)
			if err != nil || (n != 301 && n != 302 && n != 307 && n != 308) {
				bad("ssl-redirect-code", "%q is not 301, 302, 307 or 308", c)
			} else {
				out.sslCode = n
			}
		}
	}
	if v, ok := get("max-body-size"); ok {
		if _, err := sizelimit.ParseSize(v); err != nil {
			bad("max-body-size", "%v", err)
		} else {
			out.maxBody = v
		}
	}
	out.retry = retryOf(get, bad)
	out.mirror = mirrorOf(get, bad)
	for _, e := range extensionAnnotations {
		v, ok := get(e.key)
		if !ok && e.alias != "" {
			if v, ok = get(e.alias); ok {
				e.key = e.alias // report under the name the Ingress wrote
			}
		}
		if ok {
			switch {
			case v == "" && e.auth:
				out.closed = fmt.Sprintf("annotation %s%s names no %s object", Prefix, e.key, e.kind)
				bad(e.key, "names no %s object; the Ingress answers 503 (auth fails closed)", e.kind)
			case v == "":
				bad(e.key, "names no %s object", e.kind)
			case e.auth && !exists(e.kind, v):
				out.closed = fmt.Sprintf("%s %q of annotation %s%s does not exist", e.kind, v, Prefix, e.key)
				rc.Warn("metadata.annotations["+Prefix+e.key+"]", "%s %q does not exist: the Ingress answers 503 (auth fails closed)", e.kind, v)
			default:
				out.extensions = append(out.extensions, gwapiv1.LocalObjectReference{Group: coxswainGroup, Kind: gwapiv1.Kind(e.kind), Name: gwapiv1.ObjectName(v)})
			}
		}
	}
	if _, ok := get("auth-tls-secret"); !ok {
		for _, k := range clientTLSCompanions {
			if _, set := get(k); set {
				bad(k, "needs ingress.coxswain-labs.dev/auth-tls-secret")
			}
		}
	}
	return out
}

// maxHops caps trust-forwarded-for's number of proxies.
const maxHops = 64

// clientIPOf reads trust-forwarded-for ("true" for one proxy, a number of proxies, "false"),
// forwarded-for-header and forwarded-for-trusted-cidrs.
func clientIPOf(get func(string) (string, bool), bad func(string, string, ...any)) *clientip.Config {
	v, ok := get("trust-forwarded-for")
	if !ok {
		for _, k := range []string{"forwarded-for-header", "forwarded-for-trusted-cidrs"} {
			if _, set := get(k); set {
				bad(k, "needs ingress.coxswain-labs.dev/trust-forwarded-for")
			}
		}
		return nil
	}
	c := &clientip.Config{}
	if b, err := strconv.ParseBool(v); err == nil {
		if !b {
			return nil
		}
		c.Hops = 1
	} else if n, err := strconv.Atoi(v); err == nil && n >= 1 && n <= maxHops {
		c.Hops = uint32(n) //nolint:gosec // bounded above
	} else {
		bad("trust-forwarded-for", "%q is not true, false or a number of proxies 1-%d", v, maxHops)
		return nil
	}
	if h, ok := get("forwarded-for-header"); ok {
		if !httpguts.ValidHeaderFieldName(h) {
			bad("forwarded-for-header", "%q is not a header name; X-Forwarded-For is read", h)
		} else {
			c.Header = h
		}
	}
	if cidrs, ok := get("forwarded-for-trusted-cidrs"); ok {
		for _, e := range strings.Split(cidrs, ",") {
			if _, err := clientip.ParsePrefix(e); err != nil {
				bad("forwarded-for-trusted-cidrs", "%v; left out", err)
				continue
			}
			c.TrustedCIDRs = append(c.TrustedCIDRs, strings.TrimSpace(e))
		}
		if len(c.TrustedCIDRs) == 0 {
			bad("forwarded-for-trusted-cidrs", "no valid range; the header is not trusted")
			return nil
		}
		c.Hops = 0 // the ranges decide which entries are proxies
	}
	return c
}

// maxRetries caps retry, as HTTPRoute retries are capped.
const maxRetries = 1000

// retryOf reads retry (the retries after the first attempt) and retry-on (the response
// statuses, 400-599, that are retried; connection failures are retried whatever it says).
func retryOf(get func(string) (string, bool), bad func(string, string, ...any)) *irv1.Retry {
	v, ok := get("retry")
	if !ok {
		if _, on := get("retry-on"); on {
			bad("retry-on", "needs ingress.coxswain-labs.dev/retry")
		}
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > maxRetries {
		bad("retry", "%q is not a number of retries 0-%d", v, maxRetries)
		return nil
	}
	if n == 0 {
		return nil
	}
	r := &irv1.Retry{Attempts: uint32(n)} //nolint:gosec // bounded above
	if on, ok := get("retry-on"); ok {
		for _, c := range strings.Split(on, ",") {
			code, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil || code < 400 || code > 599 {
				bad("retry-on", "%q is not a status 400-599", strings.TrimSpace(c))
				continue
			}
			r.Codes = append(r.Codes, uint32(code)) //nolint:gosec // bounded above
		}
	}
	return r
}

// mirrorOf reads mirror-target ("service:port" in the Ingress's namespace) and mirror-percent.
func mirrorOf(get func(string) (string, bool), bad func(string, string, ...any)) *gwapiv1.HTTPRequestMirrorFilter {
	v, ok := get("mirror-target")
	if !ok {
		return nil
	}
	svc, port, found := strings.Cut(v, ":")
	n, err := strconv.Atoi(port)
	if !found || svc == "" || err != nil || n < 1 || n > 65535 {
		bad("mirror-target", "%q is not \"service:port\"", v)
		return nil
	}
	p := gwapiv1.PortNumber(n)
	m := &gwapiv1.HTTPRequestMirrorFilter{BackendRef: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(svc), Port: &p}}
	if pc, ok := get("mirror-percent"); ok {
		n, err := strconv.Atoi(pc)
		if err != nil || n < 0 || n > 100 {
			bad("mirror-percent", "%q is not 0-100", pc)
		} else {
			pct := int32(n) //nolint:gosec // bounded above
			m.Percent = &pct
		}
	}
	return m
}

func headerFilter(get func(string) (string, bool), bad func(string, string, ...any), base string) *gwapiv1.HTTPHeaderFilter {
	f := &gwapiv1.HTTPHeaderFilter{}
	for _, op := range []string{"set", "add"} {
		k := base + "-" + op
		v, ok := get(k)
		if !ok {
			continue
		}
		for _, pair := range strings.Split(v, ",") {
			name, val, found := strings.Cut(strings.TrimSpace(pair), ":")
			name = strings.TrimSpace(name)
			if !found || name == "" || strings.ContainsAny(name, " \t") {
				bad(k, "%q is not \"Name: value\"", pair)
				continue
			}
			h := gwapiv1.HTTPHeader{Name: gwapiv1.HTTPHeaderName(name), Value: strings.TrimSpace(val)}
			if op == "set" {
				f.Set = append(f.Set, h)
			} else {
				f.Add = append(f.Add, h)
			}
		}
	}
	if v, ok := get(base + "-remove"); ok {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				f.Remove = append(f.Remove, n)
			}
		}
	}
	if len(f.Set)+len(f.Add)+len(f.Remove) == 0 {
		return nil
	}
	return f
}

func redirectFilter(get func(string) (string, bool), bad func(string, string, ...any)) *gwapiv1.HTTPRequestRedirectFilter {
	f := &gwapiv1.HTTPRequestRedirectFilter{}
	set := false
	if v, ok := get("redirect-scheme"); ok {
		if v != "http" && v != "https" {
			bad("redirect-scheme", "%q is not http or https", v)
		} else {
			f.Scheme, set = &v, true
		}
	}
	if v, ok := get("redirect-hostname"); ok {
		h := gwapiv1.PreciseHostname(v)
		f.Hostname, set = &h, true
	}
	if v, ok := get("redirect-port"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			bad("redirect-port", "%q is not a port", v)
		} else {
			p := gwapiv1.PortNumber(n)
			f.Port, set = &p, true
		}
	}
	if v, ok := get("redirect-path"); ok {
		if !strings.HasPrefix(v, "/") {
			bad("redirect-path", "%q does not begin with \"/\"", v)
		} else {
			f.Path, set = &gwapiv1.HTTPPathModifier{Type: gwapiv1.FullPathHTTPPathModifier, ReplaceFullPath: &v}, true
		}
	}
	if v, ok := get("redirect-status-code"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || (n != 301 && n != 302 && n != 303 && n != 307 && n != 308) {
			bad("redirect-status-code", "%q is not 301, 302, 303, 307 or 308", v)
		} else {
			f.StatusCode = &n
		}
	}
	if !set {
		return nil
	}
	return f
}

// filters is the filter list of one path, through the translator's one filter path, plus the
// size limit as its module's config (it needs no object).
func (a *annotations) filters(rc translation.RouteContext, env translation.FilterEnv, regexPath string) ([]*irv1.ModuleConfig, *translation.Failure) {
	if a.closed != "" {
		// BasicAuth's closed config is the stock fail-closed answer: 503, logged with the reason.
		return []*irv1.ModuleConfig{core.MustConfig(basicauth.ModuleID, basicauth.Config{Realm: "ingress", Closed: a.closed})}, nil
	}
	var fs []gwapiv1.HTTPRouteFilter
	l := rc.Listener()
	if a.sslRedirect && l.Protocol == gwapiv1.HTTPProtocolType {
		https := "https"
		code := a.sslCode
		port := gwapiv1.PortNumber(443)
		fs = append(fs, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwapiv1.HTTPRequestRedirectFilter{Scheme: &https, StatusCode: &code, Port: &port}})
	} else if a.redirect != nil {
		fs = append(fs, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestRedirect, RequestRedirect: a.redirect})
	}
	redirects := len(fs) > 0
	for _, e := range a.extensions {
		fs = append(fs, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterExtensionRef, ExtensionRef: &e})
	}
	if a.reqHeader != nil {
		fs = append(fs, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: a.reqHeader})
	}
	if a.respHeader != nil {
		fs = append(fs, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: a.respHeader})
	}
	if a.mirror != nil {
		fs = append(fs, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestMirror, RequestMirror: a.mirror})
	}
	var regexRewrite *irv1.ModuleConfig
	if a.rewrite != "" && !redirects && regexPath != "" {
		// Capture groups: the path's own expression, anchored as the match is, and $1 in the target.
		regexRewrite = core.MustConfig(pathregex.ModuleID, pathregex.Config{Pattern: "^(?:" + regexPath + ")$", Substitution: a.rewrite})
	} else if a.rewrite != "" && !redirects {
		rw := &gwapiv1.HTTPURLRewriteFilter{Path: &gwapiv1.HTTPPathModifier{Type: gwapiv1.FullPathHTTPPathModifier, ReplaceFullPath: &a.rewrite}}
		if env.HasPrefix {
			rw.Path = &gwapiv1.HTTPPathModifier{Type: gwapiv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: &a.rewrite}
		}
		fs = append(fs, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterURLRewrite, URLRewrite: rw})
	}
	out, f := rc.Filters("metadata.annotations", fs, env)
	if f != nil {
		return nil, f
	}
	if a.maxBody != "" {
		out = append([]*irv1.ModuleConfig{core.MustConfig(sizelimit.ModuleID, sizelimit.Config{MaxSize: a.maxBody})}, out...)
	}
	if a.normalize != "" {
		// Before every other filter: they, and the backend, see the path the route matched.
		out = append([]*irv1.ModuleConfig{core.MustConfig(pathnormalize.ModuleID, pathnormalize.Config{Mode: a.normalize})}, out...)
	}
	if a.clientIP != nil {
		// First: every per-client filter after it (IpAccessControl, RateLimit) sees the client.
		out = append([]*irv1.ModuleConfig{core.MustConfig(clientip.ModuleID, a.clientIP)}, out...)
	}
	if regexRewrite != nil {
		out = append(out, regexRewrite)
	}
	return out, nil
}
