package controller

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	_ "github.com/coxswain-labs/coxswain/modules/ingress/translate"
)

// TestIngressesTranslated: the Ingresses whose status.loadBalancer the controller writes are
// those of the Store the translation made a route of (ours, by IngressClass), found by lookup:
// another class's Ingress and one that is not in the Result are left out, in an incremental
// translation too (whose route statuses are a base and an overlay).
func TestIngressesTranslated(t *testing.T) {
	rule := func(host string) string {
		return "  rules: [{host: " + host + ", http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]\n"
	}
	ingress := func(name, class, host string) string {
		return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: " + name + "}\nspec:\n  ingressClassName: " + class + "\n" + rule(host) + "---\n"
	}
	manifests := `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: coxswain}
spec: {controller: coxswain-labs.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {ports: [{name: http, port: 80}]}
---
` + ingress("ours-a", "coxswain", "a.test") + ingress("ours-b", "coxswain", "b.test") + ingress("theirs", "nginx", "c.test")
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
	ings := map[types.NamespacedName]*networkingv1.Ingress{}
	for _, o := range ld.Store.Objects[ingressGK] {
		ing := o.(*networkingv1.Ingress)
		ings[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = ing
	}
	if len(ings) != 3 {
		t.Fatalf("%d Ingresses loaded, want 3", len(ings))
	}
	inc := translator.NewIncremental()
	opts := translator.Options{Registry: core.Freeze()}
	for i := range 2 { // the second translation keeps the first's statuses
		res := inc.Translate(context.Background(), ld.Store, opts)
		got := ingressesTranslated(ings, res.Routes)
		slices.SortFunc(got, func(a, b types.NamespacedName) int { return cmp.Compare(a.String(), b.String()) })
		want := []types.NamespacedName{{Namespace: "default", Name: "ours-a"}, {Namespace: "default", Name: "ours-b"}}
		if !slices.Equal(got, want) {
			t.Fatalf("translation %d: Ingresses translated %v, want %v", i, got, want)
		}
	}
	// Only Ingresses of the map given are looked up, even when the Result has others' statuses.
	delete(ings, types.NamespacedName{Namespace: "default", Name: "ours-b"})
	if got := ingressesTranslated(ings, inc.Translate(context.Background(), ld.Store, opts).Routes); len(got) != 1 || got[0].Name != "ours-a" {
		t.Fatalf("with ours-b left out of the Store's map: %v", got)
	}
}
