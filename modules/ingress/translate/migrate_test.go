package translate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/core"
	ingresstranslate "github.com/coxswain-labs/coxswain/modules/ingress/translate"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// TestMigrate: annotations become the HTTPRoute's filters, timeouts and retry, the objects
// some need, and an HTTP twin for ssl-redirect; what has no Gateway API form is a note.
func TestMigrate(t *testing.T) {
	dir := t.TempDir()
	manifests := class + ingressYAML("shop", `ingress.coxswain-labs.dev/ssl-redirect: "true", ingress.coxswain-labs.dev/max-body-size: 1m, ingress.coxswain-labs.dev/use-regex: "true", ingress.coxswain-labs.dev/rewrite-target: /$1, ingress.coxswain-labs.dev/retry: "2", ingress.coxswain-labs.dev/read-timeout: 5s, ingress.coxswain-labs.dev/path-normalize: base, ingress.coxswain-labs.dev/auth-basic: staff`,
		`  ingressClassName: coxswain
  tls: [{hosts: [shop.example], secretName: shop-tls}]
  rules: [{host: shop.example, http: {paths: [{path: /api/(.*), pathType: ImplementationSpecific, backend: {service: {name: s, port: {number: 80}}}}]}}]`)
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	ld, err := standalone.Load(context.Background(), dir, core.Freeze())
	if err != nil {
		t.Fatal(err)
	}
	var objs []translation.Object
	for _, k := range []string{"IngressClass", "Ingress"} {
		objs = append(objs, ld.Store.Objects[schema.GroupKind{Group: networkingv1.GroupName, Kind: k}]...)
	}
	m := ingresstranslate.Migrate(objs, ingresstranslate.MigrateOptions{Namespace: "default", Name: "ingress", Class: "coxswain", HTTPAddress: "127.0.0.1:8080", HTTPSAddress: "127.0.0.1:8443"})
	if notes := strings.Join(m.Notes, "\n"); !strings.Contains(notes, "path-normalize") {
		t.Errorf("no note for path-normalize:\n%s", notes)
	}
	routes := map[string]*gwapiv1.HTTPRoute{}
	kinds := map[string]bool{}
	for _, o := range m.Objects {
		switch v := o.(type) {
		case *gwapiv1.Gateway:
			if len(v.Spec.Listeners) != 2 || v.Spec.Listeners[0].Port != 8080 || v.Spec.Listeners[1].Port != 8443 || len(v.Spec.Addresses) != 1 {
				t.Errorf("gateway: %+v", v.Spec)
			}
		case *gwapiv1.HTTPRoute:
			routes[v.Name] = v
		case *unstructured.Unstructured:
			kinds[v.GetKind()] = true
		}
	}
	if !kinds["RequestSizeLimit"] || !kinds["PathRewriteRegex"] {
		t.Errorf("filter objects: %v", kinds)
	}
	tw, main := routes["shop-0-http"], routes["shop-0"]
	if tw == nil || main == nil {
		t.Fatalf("routes: %v", routes)
	}
	if f := tw.Spec.Rules[0].Filters; len(f) != 1 || f[0].RequestRedirect == nil || *f[0].RequestRedirect.StatusCode != 308 || *tw.Spec.ParentRefs[0].SectionName != "http" {
		t.Errorf("http twin: %+v", tw.Spec)
	}
	r := main.Spec.Rules[0]
	if *r.Matches[0].Path.Type != gwapiv1.PathMatchRegularExpression || r.Retry == nil || *r.Retry.Attempts != 2 || r.Timeouts == nil || *r.Timeouts.BackendRequest != "5000ms" {
		t.Errorf("rule: %+v", r)
	}
	var refs []string
	for _, f := range r.Filters {
		if f.ExtensionRef != nil {
			refs = append(refs, string(f.ExtensionRef.Kind))
		}
	}
	if strings.Join(refs, ",") != "RequestSizeLimit,BasicAuth,PathRewriteRegex" {
		t.Errorf("extension refs %v", refs)
	}
}
