package standalone

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"

	corev1 "k8s.io/api/core/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// writeFiles writes name → content under a new temp dir and returns it.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustLoad(t *testing.T, path string) *Result {
	t.Helper()
	res, err := Load(context.Background(), path, nil)
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return res
}

const gatewayDoc = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
  labels: {team: a}
  creationTimestamp: "2024-01-02T03:04:05Z"
spec:
  gatewayClassName: coxswain
  listeners:
  - name: http
    port: 8080
    protocol: HTTP
  - name: https
    port: 8443
    protocol: HTTPS
    tls:
      certificateRefs:
      - name: cert
`

const routeDoc = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web
  namespace: apps
  generation: 7
spec:
  parentRefs:
  - name: gw
    namespace: default
  rules:
  - backendRefs:
    - name: web
      port: 80
  - matches:
    - headers:
      - name: x-env
        value: canary
`

func TestLoadDefaultsAndMetadata(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"all.yaml": "# leading comment\n---\n" + gatewayDoc + "---\n" + routeDoc + "---\n# only a comment\n",
		"secret.yaml": `apiVersion: v1
kind: Secret
metadata: {name: cert}
type: kubernetes.io/tls
data:
  tls.crt: Y2VydA==
stringData:
  tls.key: key
`,
	})
	res := mustLoad(t, dir)
	if res.HasErrors() {
		t.Fatalf("unexpected errors: %v", res.Err())
	}
	s := res.Store
	routes := s.Objects[translatortest.HTTPRoute]
	if len(s.Gateways) != 1 || len(routes) != 1 || len(s.Secrets) != 1 {
		t.Fatalf("store: %d gateways, %d routes, %d secrets", len(s.Gateways), len(routes), len(s.Secrets))
	}
	gw := s.Gateways[0]
	if gw.Namespace != "default" || gw.Generation != 1 || gw.Labels["team"] != "a" || gw.CreationTimestamp.Year() != 2024 {
		t.Errorf("gateway metadata not honoured: %+v", gw.ObjectMeta)
	}
	if gw.APIVersion != "gateway.networking.k8s.io/v1" || gw.Kind != "Gateway" {
		t.Errorf("gateway type meta = %s %s", gw.APIVersion, gw.Kind)
	}
	l := gw.Spec.Listeners[1]
	if *l.AllowedRoutes.Namespaces.From != gwapiv1.NamespacesFromSame || *l.TLS.Mode != gwapiv1.TLSModeTerminate ||
		*l.TLS.CertificateRefs[0].Kind != "Secret" {
		t.Errorf("gateway defaults not applied: %+v", l)
	}
	r := routes[0].(*gwapiv1.HTTPRoute)
	if r.Namespace != "apps" || r.Generation != 7 {
		t.Errorf("route metadata: %s gen %d", r.Namespace, r.Generation)
	}
	if *r.Spec.ParentRefs[0].Kind != "Gateway" || *r.Spec.Rules[0].BackendRefs[0].Weight != 1 ||
		*r.Spec.Rules[0].Matches[0].Path.Value != "/" || *r.Spec.Rules[1].Matches[0].Path.Type != gwapiv1.PathMatchPathPrefix ||
		*r.Spec.Rules[1].Matches[0].Headers[0].Type != gwapiv1.HeaderMatchExact {
		t.Errorf("route defaults not applied: %+v", r.Spec)
	}
	sec := s.Secrets[0]
	if string(sec.Data["tls.crt"]) != "cert" || string(sec.Data["tls.key"]) != "key" || sec.StringData != nil {
		t.Errorf("secret data = %v, stringData = %v", sec.Data, sec.StringData)
	}
	src, ok := res.SourceOf(ObjectRef{Kind: "HTTPRoute", Namespace: "apps", Name: "web"})
	if !ok || src.Doc != 3 || filepath.Base(src.File) != "all.yaml" || src.Line != 22 {
		t.Errorf("route source = %+v", src)
	}
	var nsNames []string
	for _, ns := range s.Namespaces {
		nsNames = append(nsNames, ns.Name+"="+ns.Labels["kubernetes.io/metadata.name"])
	}
	if strings.Join(nsNames, ",") != "apps=apps,default=default" {
		t.Errorf("implicit namespaces = %v", nsNames)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		// want are substrings of the single error's text.
		want   []string
		reason string
		field  string
	}{
		{
			name:    "unknown field",
			content: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  portz: []\n",
			want:    []string{"bad.yaml:5", "Service default/s", `unknown field "spec.portz"`},
			reason:  ReasonUnknownField,
			field:   "spec.portz",
		},
		{
			name:    "unknown kind names the known ones",
			content: "kind: Thing\napiVersion: example.com/v1\nmetadata: {name: t, namespace: x}\n",
			want:    []string{"Thing x/t", `"example.com/v1"`, "gateway.networking.k8s.io/v1 HTTPRoute", "discovery.k8s.io/v1 EndpointSlice"},
			reason:  ReasonUnknownKind,
		},
		{
			name:    "bad yaml names the file line",
			content: "# one\n# two\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: [oops\n",
			want:    []string{"bad.yaml:7 (document 2)", "line 7"},
			reason:  ReasonInvalidYAML,
		},
		{
			name:    "wrong type names the field",
			content: "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec:\n  gatewayClassName: c\n  listeners:\n  - {name: h, port: eighty, protocol: HTTP}\n",
			want:    []string{"bad.yaml:7", "Gateway default/g", "field spec.listeners[0].port", "a string where the Gateway schema wants an integer"},
			reason:  ReasonInvalidValue,
			field:   "spec.listeners[0].port",
		},
		{
			name:    "missing name",
			content: "apiVersion: v1\nkind: Namespace\nmetadata: {labels: {a: b}}\n",
			want:    []string{"metadata.name is required"},
			reason:  ReasonMissingName,
			field:   "metadata.name",
		},
		{
			name:    "duplicate key",
			content: "apiVersion: v1\nkind: Namespace\nkind: Namespace\nmetadata: {name: a}\n",
			want:    []string{"bad.yaml:3", "already set"},
			reason:  ReasonInvalidYAML,
		},
		{
			name:    "not an object",
			content: "- a\n- b\n",
			want:    []string{"must be a Kubernetes object"},
			reason:  ReasonInvalidYAML,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"bad.yaml":  tc.content,
				"good.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: ok}\nspec:\n  ports: [{port: 80}]\n",
			})
			res := mustLoad(t, dir)
			if len(res.Errors) != 1 {
				t.Fatalf("want 1 error, got %d: %v", len(res.Errors), res.Err())
			}
			e := res.Errors[0]
			for _, w := range tc.want {
				if !strings.Contains(e.Error(), w) {
					t.Errorf("error %q does not contain %q", e.Error(), w)
				}
			}
			if e.Reason != tc.reason || e.Field != tc.field {
				t.Errorf("reason/field = %s/%s, want %s/%s", e.Reason, e.Field, tc.reason, tc.field)
			}
			if len(res.Store.Services) == 0 || res.Store.Services[len(res.Store.Services)-1].Name != "ok" {
				t.Errorf("the valid document was not loaded")
			}
		})
	}
}

func TestLoadDuplicateKeepsFirstByPath(t *testing.T) {
	svc := func(port string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: apps}\nspec:\n  ports: [{port: " + port + "}]\n"
	}
	dir := writeFiles(t, map[string]string{
		"b/svc.yaml": svc("2"),
		"a.yaml":     svc("1"),
	})
	res := mustLoad(t, dir)
	if len(res.Errors) != 1 || res.Errors[0].Reason != ReasonDuplicate {
		t.Fatalf("errors = %v", res.Err())
	}
	msg := res.Errors[0].Error()
	if !strings.Contains(msg, filepath.Join("b", "svc.yaml")) || !strings.Contains(msg, "a.yaml") {
		t.Errorf("duplicate error should name both files: %s", msg)
	}
	if len(res.Store.Services) != 1 || res.Store.Services[0].Spec.Ports[0].Port != 1 {
		t.Errorf("kept the wrong duplicate: %+v", res.Store.Services)
	}
}

func TestLoadListJSONAndHidden(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"list.yaml": `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: one, labels: {env: prod}}
- apiVersion: v1
  kind: Namespace
  metadata: {name: two}
  bogus: 1
`,
		"svc.json":         `{"apiVersion":"v1","kind":"Service","metadata":{"name":"j"},"spec":{"ports":[{"port":80}]}}`,
		".hidden.yaml":     "not: [valid",
		".git/x.yaml":      "not: [valid",
		"notes.txt":        "not: [valid",
		"sub/deeper/e.yml": "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e}\naddressType: IPv4\nendpoints: []\nports: [{port: 80}]\n",
	})
	res := mustLoad(t, dir)
	if len(res.Errors) != 1 || res.Errors[0].Source.Item != 2 || res.Errors[0].Field != "bogus" {
		t.Fatalf("errors = %v", res.Err())
	}
	if !strings.Contains(res.Errors[0].Error(), "item 2") {
		t.Errorf("error should name the list item: %v", res.Errors[0])
	}
	if len(res.Store.Services) != 1 || len(res.Store.EndpointSlices) != 1 {
		t.Errorf("json or nested yml not loaded: %d services, %d slices", len(res.Store.Services), len(res.Store.EndpointSlices))
	}
	if p := res.Store.EndpointSlices[0].Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("endpoint slice port protocol not defaulted")
	}
	found := false
	for _, ns := range res.Store.Namespaces {
		if ns.Name == "one" && ns.Labels["env"] == "prod" && ns.Labels["kubernetes.io/metadata.name"] == "one" {
			found = true
		}
	}
	if !found {
		t.Errorf("declared namespace lost its labels: %+v", res.Store.Namespaces)
	}
}

// TestLoadConfigMapLayout loads a directory laid out like a mounted ConfigMap: each key is a
// symlink to ..data/<key>, and ..data links to a hidden timestamped directory.
func TestLoadConfigMapLayout(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"..2024_01_01/svc.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: cm}\nspec:\n  ports: [{port: 80}]\n",
	})
	must(t, os.Symlink("..2024_01_01", filepath.Join(dir, "..data")))
	must(t, os.Symlink(filepath.Join("..data", "svc.yaml"), filepath.Join(dir, "svc.yaml")))
	res := mustLoad(t, dir)
	if res.HasErrors() || len(res.Store.Services) != 1 || len(res.Files) != 1 {
		t.Fatalf("files %v, errors %v, services %d", res.Files, res.Err(), len(res.Store.Services))
	}
}

func TestLoadSymlinkedRoot(t *testing.T) {
	dir := writeFiles(t, map[string]string{"real/svc.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports: [{port: 80}]\n"})
	link := filepath.Join(dir, "link")
	must(t, os.Symlink("real", link))
	res := mustLoad(t, link)
	if res.HasErrors() || len(res.Store.Services) != 1 {
		t.Fatalf("files %v, errors %v", res.Files, res.Err())
	}
	if want := filepath.Join(link, "svc.yaml"); res.Files[0] != want {
		t.Errorf("file named %q, want %q", res.Files[0], want)
	}
}

func TestLoadSingleFileAndMissingPath(t *testing.T) {
	dir := writeFiles(t, map[string]string{"manifest.txt": "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"})
	res := mustLoad(t, filepath.Join(dir, "manifest.txt"))
	if res.HasErrors() || len(res.Store.Namespaces) != 2 {
		t.Fatalf("errors %v, namespaces %d", res.Err(), len(res.Store.Namespaces))
	}
	if _, err := Load(context.Background(), filepath.Join(dir, "nope"), nil); err == nil {
		t.Fatal("loading a missing path should fail")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
