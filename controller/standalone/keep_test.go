package standalone

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestLoadOverKeepsLastGood breaks the documents of a loaded directory in each way a reload can
// see them broken: the objects they held keep their last good version, an error still names the
// file, line and field, and what is valid or new loads as it is.
func TestLoadOverKeepsLastGood(t *testing.T) {
	route := func(name, path string) string {
		return "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: " + name + "}\nspec:\n  rules:\n  - matches: [{path: {type: PathPrefix, value: " + path + "}}]\n    backendRefs: [{name: b, port: 80}]\n"
	}
	good := map[string]string{"a.yaml": route("a", "/a"), "b.yaml": route("b", "/b") + "---\n" + route("b2", "/b2")}
	tests := []struct {
		name    string
		change  func(dir string)
		kept    []string // routes kept from the previous load
		present []string // routes present at all afterwards
		want    string   // in the error
	}{
		{"truncated YAML", func(dir string) { write(t, dir, "b.yaml", good["b.yaml"][:len(route("b", "/b"))+40]) },
			[]string{"b2"}, []string{"a", "b", "b2"}, "b.yaml:"}, // b still parses
		{"binary garbage", func(dir string) { write(t, dir, "b.yaml", "\x00\x01\xff garbage") },
			[]string{"b", "b2"}, []string{"a", "b", "b2"}, "b.yaml:1"},
		{"wrong type", func(dir string) {
			write(t, dir, "a.yaml", strings.Replace(good["a.yaml"], "port: 80", "port: eighty", 1))
		},
			[]string{"a"}, []string{"a", "b", "b2"}, "a.yaml:7: HTTPRoute default/a: field spec.rules[0].backendRefs[0].port"},
		{"unknown field", func(dir string) {
			write(t, dir, "a.yaml", strings.Replace(good["a.yaml"], "backendRefs", "backendRefz", 1))
		},
			[]string{"a"}, []string{"a", "b", "b2"}, "a.yaml:7"},
		{"10 MB document", func(dir string) {
			write(t, dir, "a.yaml", good["a.yaml"]+"  hostnames: [\""+strings.Repeat("x", 10<<20)+"\"]\n")
		}, []string{"a"}, []string{"a", "b", "b2"}, "TooLarge"},
		{"a deleted file is a removal", func(dir string) { _ = os.Remove(filepath.Join(dir, "b.yaml")) },
			nil, []string{"a"}, ""},
		{"a duplicate keeps the first", func(dir string) { write(t, dir, "c.yaml", route("a", "/other")) },
			nil, []string{"a", "b", "b2"}, "Duplicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, good)
			prev := mustLoad(t, dir)
			tc.change(dir)
			res, err := LoadOver(context.Background(), dir, nil, prev)
			if err != nil {
				t.Fatal(err)
			}
			var kept, present []string
			for _, k := range res.Kept {
				kept = append(kept, k.Object.Name)
			}
			for _, r := range res.Store.Objects[schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}] {
				present = append(present, r.GetName())
			}
			sort.Strings(present)
			if strings.Join(kept, ",") != strings.Join(tc.kept, ",") || strings.Join(present, ",") != strings.Join(tc.present, ",") {
				t.Errorf("kept %v, present %v; want %v, %v", kept, present, tc.kept, tc.present)
			}
			if tc.want != "" && (len(res.Errors) == 0 || !strings.Contains(res.Errors[0].Error(), tc.want)) {
				t.Errorf("errors %v, want one with %q", res.Err(), tc.want)
			}
		})
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
