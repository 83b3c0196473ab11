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
	for k := range res.Routes {
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
