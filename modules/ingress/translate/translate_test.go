package translate_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	_ "github.com/coxswain-labs/coxswain/modules/filters/headers/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/mirror/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/redirect/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/rewrite/translate"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/ingress/translate"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
)

const class = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: coxswain}
spec: {controller: coxswain-labs.dev/ingress-controller}
---
`

func services(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString("apiVersion: v1\nkind: Service\nmetadata: {name: " + n + "}\nspec: {ports: [{name: http, port: 80}]}\n---\n")
		b.WriteString("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: " + n + ", labels: {kubernetes.io/service-name: " + n + "}}\naddressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints: [{addresses: [127.0.0.1]}]\n---\n")
	}
	return b.String()
}

// translate loads manifests as `serve -f` does and translates them with the Ingress listener on
// port 80 (and 443).
func translate(t *testing.T, manifests string) *translator.Result {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	ld, err := standalone.Load(context.Background(), dir, core.Freeze())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ld.Errors {
		t.Fatalf("load: %v", e)
	}
	return translator.Translate(context.Background(), ld.Store, translator.Options{AllowLoopbackEndpoints: true})
}

// pick is the name of the IR route a request for host and path takes on port, as the engine
// picks it: the server by listener hostname, then the virtual hosts from the most specific,
// the first route whose route.ingress / route.http match accepts it. "" when none does.
func pick(t *testing.T, snap *irv1.Snapshot, port uint32, host, path string) string {
	t.Helper()
	r := httptest.NewRequest("GET", "http://"+host+path, nil)
	for _, l := range snap.Listeners {
		if l.Port != port {
			continue
		}
		for _, s := range l.Servers { // sorted by specificity: the first that covers host
			if !covers(s.Hostname, host) {
				continue
			}
			for _, vh := range s.VirtualHosts {
				if !covers(vh.Hostname, host) {
					continue
				}
				for _, rt := range vh.Routes {
					if matches(t, rt, r) {
						return rt.Name
					}
				}
			}
			return ""
		}
	}
	return ""
}

func covers(pattern, host string) bool {
	switch {
	case pattern == "":
		return true
	case strings.HasPrefix(pattern, "*."):
		return strings.HasSuffix(host, pattern[1:])
	}
	return pattern == host
}

func matches(t *testing.T, rt *irv1.Route, r *http.Request) bool {
	t.Helper()
	info, ok := core.Freeze().Lookup(core.ModuleID(rt.Match.Id))
	if !ok {
		t.Fatalf("no module %s", rt.Match.Id)
	}
	m := info.New()
	if err := json.Unmarshal(rt.Match.Json, m); err != nil {
		t.Fatal(err)
	}
	if p, ok := m.(core.Provisioner); ok {
		if err := p.Provision(nil); err != nil {
			t.Fatal(err)
		}
	}
	return m.(core.HTTPMatcher).Match(r)
}

func ingressYAML(name, annotations, spec string) string {
	return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: " + name + "\n  annotations: {" + annotations + "}\nspec:\n" + spec + "\n---\n"
}

// problems joins the Problems and Warnings of the result, for substring checks.
func problems(res *translator.Result) string {
	var b strings.Builder
	for _, p := range append(res.Problems, res.Warnings...) {
		b.WriteString(p.Error() + "\n")
	}
	return b.String()
}

func TestPathTypesAndPrecedence(t *testing.T) {
	res := translate(t, class+services("exact", "prefix", "longer", "impl", "def")+ingressYAML("a", "", `  ingressClassName: coxswain
  defaultBackend: {service: {name: def, port: {number: 80}}}
  rules:
  - http:
      paths:
      - {path: /foo, pathType: Exact, backend: {service: {name: exact, port: {number: 80}}}}
      - {path: /foo/, pathType: Prefix, backend: {service: {name: prefix, port: {number: 80}}}}
      - {path: /foo/bar, pathType: Prefix, backend: {service: {name: longer, port: {number: 80}}}}
      - {path: /impl, pathType: ImplementationSpecific, backend: {service: {name: impl, port: {number: 80}}}}`))
	if p := problems(res); p != "" {
		t.Fatalf("problems: %s", p)
	}
	want := map[string]string{
		"/foo":         "Ingress/default/a/rule/0/match/0", // Exact beats the Prefix of the same path
		"/foo/":        "Ingress/default/a/rule/1/match/0", // "/foo/" is the element-wise prefix /foo
		"/foo/x":       "Ingress/default/a/rule/1/match/0",
		"/foo/bar/baz": "Ingress/default/a/rule/2/match/0", // the longer prefix wins
		"/foobar":      "Ingress/default/a/rule/4/match/0", // not element-wise under /foo: defaultBackend
		"/impl/x":      "Ingress/default/a/rule/3/match/0", // ImplementationSpecific is a prefix
		"/":            "Ingress/default/a/rule/4/match/0",
	}
	for path, w := range want {
		if got := pick(t, res.Snapshot, 80, "any.example", path); got != w {
			t.Errorf("%s: got %q, want %q", path, got, w)
		}
	}
}

func TestUseRegex(t *testing.T) {
	res := translate(t, class+services("re", "plain")+ingressYAML("a", `ingress.coxswain-labs.dev/use-regex: "true"`, `  ingressClassName: coxswain
  rules:
  - http:
      paths:
      - {path: "/v[0-9]+/.*", pathType: ImplementationSpecific, backend: {service: {name: re, port: {number: 80}}}}
      - {path: "/v1/plain", pathType: Prefix, backend: {service: {name: plain, port: {number: 80}}}}
      - {path: "/(", pathType: ImplementationSpecific, backend: {service: {name: re, port: {number: 80}}}}`))
	if got := pick(t, res.Snapshot, 80, "h", "/v2/x"); got != "Ingress/default/a/rule/0/match/0" {
		t.Errorf("regex: got %q", got)
	}
	if got := pick(t, res.Snapshot, 80, "h", "/v1/plain"); got != "Ingress/default/a/rule/1/match/0" {
		t.Errorf("plain path before a regex: got %q", got)
	}
	if p := problems(res); !strings.Contains(p, "spec.rules[0].http.paths[2].path") || !strings.Contains(p, "use-regex") {
		t.Errorf("an invalid regex is not reported: %s", p)
	}
}

func TestHosts(t *testing.T) {
	res := translate(t, class+services("exact", "wild", "any")+ingressYAML("a", "", `  ingressClassName: coxswain
  rules:
  - host: a.example.com
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: exact, port: {number: 80}}}}]}
  - host: "*.example.com"
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: wild, port: {number: 80}}}}]}
  - http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: any, port: {number: 80}}}}]}`))
	for host, w := range map[string]string{
		"a.example.com":   "Ingress/default/a/rule/0/match/0",
		"b.example.com":   "Ingress/default/a/rule/1/match/0",
		"x.b.example.com": "Ingress/default/a/rule/2/match/0", // a wildcard is one label
		"example.com":     "Ingress/default/a/rule/2/match/0",
		"other.test":      "Ingress/default/a/rule/2/match/0",
	} {
		if got := pick(t, res.Snapshot, 80, host, "/"); got != w {
			t.Errorf("%s: got %q, want %q", host, got, w)
		}
	}
}

func TestClassSelection(t *testing.T) {
	defaultClass := `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: dflt, annotations: {ingressclass.kubernetes.io/is-default-class: "true"}}
spec: {controller: coxswain-labs.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
`
	rule := func(host string) string {
		return "  rules: [{host: " + host + ", http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]"
	}
	res := translate(t, class+defaultClass+services("s")+
		ingressYAML("by-name", "", "  ingressClassName: coxswain\n"+rule("name.test"))+
		ingressYAML("legacy", `kubernetes.io/ingress.class: coxswain`, rule("legacy.test"))+
		ingressYAML("default", "", rule("default.test"))+
		ingressYAML("theirs", "", "  ingressClassName: nginx\n"+rule("theirs.test"))+
		ingressYAML("theirs-legacy", `kubernetes.io/ingress.class: nginx`, rule("theirs-legacy.test")))
	for host, served := range map[string]bool{"name.test": true, "legacy.test": true, "default.test": true, "theirs.test": false, "theirs-legacy.test": false} {
		if got := pick(t, res.Snapshot, 80, host, "/") != ""; got != served {
			t.Errorf("%s served %v, want %v", host, got, served)
		}
	}
	for k := range res.Routes.All() {
		if strings.HasPrefix(k.Name, "theirs") {
			t.Errorf("another class's Ingress %s has a status", k)
		}
	}
}

func TestResourceBackendAndPortName(t *testing.T) {
	res := translate(t, class+services("s")+ingressYAML("a", "", `  ingressClassName: coxswain
  rules:
  - http:
      paths:
      - {path: /r, pathType: Prefix, backend: {resource: {apiGroup: example.com, kind: Bucket, name: b}}}
      - {path: /n, pathType: Prefix, backend: {service: {name: s, port: {name: http}}}}
      - {path: /ok, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}`))
	p := problems(res)
	for _, want := range []string{"spec.rules[0].http.paths[0].backend.resource", "resource backends", "spec.rules[0].http.paths[1].backend.service.port"} {
		if !strings.Contains(p, want) {
			t.Errorf("problems lack %q: %s", want, p)
		}
	}
	if got := pick(t, res.Snapshot, 80, "h", "/ok"); got != "Ingress/default/a/rule/2/match/0" {
		t.Errorf("the valid path is not served: %q", got)
	}
	if got := pick(t, res.Snapshot, 80, "h", "/r"); got != "" {
		t.Errorf("a resource backend is served: %q", got)
	}
}

// routeNamed finds an IR route by name on port.
func routeNamed(snap *irv1.Snapshot, port uint32, name string) *irv1.Route {
	for _, l := range snap.Listeners {
		if l.Port != port {
			continue
		}
		for _, s := range l.Servers {
			for _, vh := range s.VirtualHosts {
				for _, r := range vh.Routes {
					if r.Name == name {
						return r
					}
				}
			}
		}
	}
	return nil
}

func filterIDs(r *irv1.Route) string {
	var ids []string
	for _, f := range r.Filters {
		ids = append(ids, f.Id+" "+string(f.Json))
	}
	return strings.Join(ids, "\n")
}

func TestAnnotations(t *testing.T) {
	cases := []struct {
		name, annotations string
		want              []string // substrings of the filters (module ID and config)
		timeouts          *irv1.Timeouts
	}{
		{"request headers", `ingress.coxswain-labs.dev/request-header-set: "x-a: 1", ingress.coxswain-labs.dev/request-header-add: "x-b: 2", ingress.coxswain-labs.dev/request-header-remove: "x-c"`,
			[]string{"request_header_modifier", `"x-a"`, `"x-b"`, `"x-c"`}, nil},
		{"response headers", `ingress.coxswain-labs.dev/response-header-set: "x-r: 1"`, []string{"response_header_modifier", `"x-r"`}, nil},
		{"rewrite", `ingress.coxswain-labs.dev/rewrite-target: /new`, []string{"url_rewrite", `/new`}, nil},
		{"redirect", `ingress.coxswain-labs.dev/redirect-hostname: other.test, ingress.coxswain-labs.dev/redirect-status-code: "301"`, []string{"request_redirect", "other.test", "301"}, nil},
		{"ssl-redirect", `ingress.coxswain-labs.dev/ssl-redirect: "true"`, []string{"request_redirect", "https", "308"}, nil},
		{"ssl-redirect code", `ingress.coxswain-labs.dev/ssl-redirect: "true", ingress.coxswain-labs.dev/ssl-redirect-code: "301"`, []string{"request_redirect", "301"}, nil},
		{"max-body-size", `ingress.coxswain-labs.dev/max-body-size: 1m`, []string{"RequestSizeLimit", `"1m"`}, nil},
		{"timeouts", `ingress.coxswain-labs.dev/read-timeout: 5s, ingress.coxswain-labs.dev/send-timeout: 1m`, nil, &irv1.Timeouts{BackendRequestMs: 5000, RequestMs: 60000}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := translate(t, class+services("s")+ingressYAML("a", c.annotations, `  ingressClassName: coxswain
  rules: [{http: {paths: [{path: /p, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]`))
			if p := problems(res); p != "" {
				t.Fatalf("problems: %s", p)
			}
			r := routeNamed(res.Snapshot, 80, "Ingress/default/a/rule/0/match/0")
			if r == nil {
				t.Fatal("route not found")
			}
			fs := filterIDs(r)
			for _, w := range c.want {
				if !strings.Contains(fs, w) {
					t.Errorf("filters lack %q:\n%s", w, fs)
				}
			}
			if c.timeouts != nil && (r.Timeouts.GetBackendRequestMs() != c.timeouts.BackendRequestMs || r.Timeouts.GetRequestMs() != c.timeouts.RequestMs) {
				t.Errorf("timeouts %v, want %v", r.Timeouts, c.timeouts)
			}
		})
	}
}

// TestInvalidAnnotations: an invalid value is a warning naming the annotation and is ignored;
// the Ingress keeps serving, with the annotations that are valid.
func TestInvalidAnnotations(t *testing.T) {
	res := translate(t, class+services("s")+ingressYAML("a",
		`ingress.coxswain-labs.dev/read-timeout: banana, ingress.coxswain-labs.dev/max-body-size: 10kb, ingress.coxswain-labs.dev/redirect-status-code: "299", ingress.coxswain-labs.dev/request-header-set: "novalue", ingress.coxswain-labs.dev/response-header-set: "x-ok: 1", ingress.coxswain-labs.dev/retry: "many"`,
		`  ingressClassName: coxswain
  rules: [{http: {paths: [{path: /p, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]`))
	p := problems(res)
	for _, a := range []string{"read-timeout", "max-body-size", "redirect-status-code", "request-header-set", "retry"} {
		if !strings.Contains(p, "metadata.annotations[ingress.coxswain-labs.dev/"+a+"]") {
			t.Errorf("no warning names %s:\n%s", a, p)
		}
	}
	r := routeNamed(res.Snapshot, 80, "Ingress/default/a/rule/0/match/0")
	if r == nil {
		t.Fatal("the Ingress is not served")
	}
	if fs := filterIDs(r); !strings.Contains(fs, "response_header_modifier") || strings.Contains(fs, "RequestSizeLimit") {
		t.Errorf("filters:\n%s", fs)
	}
	if r.Timeouts != nil {
		t.Errorf("an invalid timeout is applied: %v", r.Timeouts)
	}
}

func TestExtensionAnnotations(t *testing.T) {
	res := translate(t, class+services("s")+`apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: IpAccessControl
metadata: {name: office}
spec: {allow: [10.0.0.0/8]}
---
`+ingressYAML("a", `ingress.coxswain-labs.dev/ip-access-control: office`, `  ingressClassName: coxswain
  rules: [{http: {paths: [{path: /p, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]`))
	if p := problems(res); p != "" {
		t.Fatalf("problems: %s", p)
	}
	r := routeNamed(res.Snapshot, 80, "Ingress/default/a/rule/0/match/0")
	if fs := filterIDs(r); !strings.Contains(fs, "IpAccessControl") || !strings.Contains(fs, "10.0.0.0/8") {
		t.Errorf("filters:\n%s", fs)
	}
}

func TestTLS(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "ingress", "tls-secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	secret := string(b) + "\n---\n"
	res := translate(t, class+services("s")+secret+ingressYAML("a", "", `  ingressClassName: coxswain
  tls: [{hosts: [app.test], secretName: app-tls}]
  rules: [{host: app.test, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]`))
	var https *irv1.Listener
	for _, l := range res.Snapshot.Listeners {
		if l.Port == 443 {
			https = l
		}
	}
	if https == nil {
		t.Fatalf("no HTTPS listener; problems: %s", problems(res))
	}
	if len(https.Servers) != 1 || https.Servers[0].Hostname != "app.test" || https.Servers[0].Tls == nil {
		t.Fatalf("HTTPS servers %v", https.Servers)
	}
	if got := pick(t, res.Snapshot, 443, "app.test", "/"); got != "Ingress/default/a/rule/0/match/0" {
		t.Errorf("HTTPS app.test: %q", got)
	}
	for k := range res.Gateways {
		t.Errorf("an implicit Gateway has a status: %s", k)
	}
}

// TestGatewayAPITakesSharedHost: an HTTPRoute on a Gateway sharing the Ingress port takes the
// host; the Ingress is warned and keeps its other hosts.
func TestGatewayAPITakesSharedHost(t *testing.T) {
	gw := `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gc}
spec: {controllerName: coxswain-labs.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec: {gatewayClassName: gc, listeners: [{name: http, protocol: HTTP, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  hostnames: [shared.test, a.wild.test]
  rules: [{backendRefs: [{name: s, port: 80}]}]
---
`
	res := translate(t, class+services("s")+gw+ingressYAML("a", "", `  ingressClassName: coxswain
  rules:
  - host: shared.test
    http: {paths: [{path: /only-ingress, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}
  - host: mine.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}
  - host: "*.wild.test"
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}`))
	if got := pick(t, res.Snapshot, 80, "b.wild.test", "/"); got != "Ingress/default/a/rule/2/match/0" {
		t.Errorf("b.wild.test: %q, want the Ingress", got)
	}
	if p := problems(res); !strings.Contains(p, `host "a.wild.test" within "*.wild.test" on port 80 is served by HTTPRoute default/r`) {
		t.Errorf("the Ingress is not told about a.wild.test: %s", p)
	}
	if got := pick(t, res.Snapshot, 80, "shared.test", "/only-ingress"); got != "HTTPRoute/default/r/rule/0/match/0" {
		t.Errorf("shared.test: %q, want the HTTPRoute", got)
	}
	if got := pick(t, res.Snapshot, 80, "mine.test", "/"); got != "Ingress/default/a/rule/1/match/0" {
		t.Errorf("mine.test: %q, want the Ingress", got)
	}
	if p := problems(res); !strings.Contains(p, `host "shared.test" on port 80 is served by HTTPRoute default/r`) {
		t.Errorf("the Ingress is not told: %s", p)
	}
}

// TestAuthFailsClosed: an auth annotation naming an object that does not exist answers 503
// (BasicAuth's closed config) instead of serving without authentication.
func TestAuthFailsClosed(t *testing.T) {
	for _, a := range []string{"auth-basic-secret", "auth-basic", "auth-jwt", "ext-auth"} {
		t.Run(a, func(t *testing.T) {
			res := translate(t, class+services("s")+ingressYAML("a", `ingress.coxswain-labs.dev/`+a+`: missing`, `  ingressClassName: coxswain
  rules: [{http: {paths: [{path: /p, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]`))
			r := routeNamed(res.Snapshot, 80, "Ingress/default/a/rule/0/match/0")
			if r == nil {
				t.Fatal("route not found")
			}
			if fs := filterIDs(r); !strings.Contains(fs, "BasicAuth") || !strings.Contains(fs, `"closed"`) {
				t.Errorf("filters:\n%s", fs)
			}
			if p := problems(res); !strings.Contains(p, "fails closed") {
				t.Errorf("not reported: %s", p)
			}
		})
	}
}

func TestRetryMirrorRegexRewrite(t *testing.T) {
	res := translate(t, class+services("s", "m")+ingressYAML("a",
		`ingress.coxswain-labs.dev/retry: "2", ingress.coxswain-labs.dev/retry-on: "502, 503", ingress.coxswain-labs.dev/mirror-target: "m:80", ingress.coxswain-labs.dev/mirror-percent: "25", ingress.coxswain-labs.dev/use-regex: "true", ingress.coxswain-labs.dev/rewrite-target: "/v2/$1"`,
		`  ingressClassName: coxswain
  rules: [{http: {paths: [{path: "/v1/(.*)", pathType: ImplementationSpecific, backend: {service: {name: s, port: {number: 80}}}}]}}]`))
	if p := problems(res); p != "" {
		t.Fatalf("problems: %s", p)
	}
	r := routeNamed(res.Snapshot, 80, "Ingress/default/a/rule/0/match/0")
	if r == nil {
		t.Fatal("route not found")
	}
	if r.Retry.GetAttempts() != 2 || len(r.Retry.GetCodes()) != 2 || r.Retry.Codes[0] != 502 {
		t.Errorf("retry %v", r.Retry)
	}
	fs := filterIDs(r)
	for _, w := range []string{"mirror", `default/m:80`, "25", "PathRewriteRegex", `"^(?:/v1/(.*))$"`, `"/v2/$1"`} {
		if !strings.Contains(fs, w) {
			t.Errorf("filters lack %q:\n%s", w, fs)
		}
	}
}

// TestGatewayAPIBeforeCatchAllIngress: an Ingress with a defaultBackend serves any host, so its
// rules share the catch-all; a Gateway API route on one of its hosts comes first and the
// Ingress is told that only what that route does not match falls through to it.
func TestGatewayAPIBeforeCatchAllIngress(t *testing.T) {
	gw := `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: gc}
spec: {controllerName: coxswain-labs.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec: {gatewayClassName: gc, listeners: [{name: http, protocol: HTTP, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  hostnames: [shared.test]
  rules: [{matches: [{path: {type: PathPrefix, value: /gw}}], backendRefs: [{name: s, port: 80}]}]
---
`
	res := translate(t, class+services("s")+gw+ingressYAML("a", "", `  ingressClassName: coxswain
  defaultBackend: {service: {name: s, port: {number: 80}}}
  rules:
  - host: shared.test
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}`))
	if got := pick(t, res.Snapshot, 80, "shared.test", "/gw"); got != "HTTPRoute/default/r/rule/0/match/0" {
		t.Errorf("shared.test/gw: %q, want the HTTPRoute", got)
	}
	if p := problems(res); !strings.Contains(p, `host "shared.test" on port 80 is served by HTTPRoute default/r; Gateway API routes take precedence, so this Ingress serves only the requests they do not match`) {
		t.Errorf("the Ingress is not told: %s", p)
	}
}
