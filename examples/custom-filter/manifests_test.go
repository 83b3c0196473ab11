package hmacsign_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"

	"example.com/hmacsign"
)

// TestManifestSpec: the HMACSignature in manifests/ is a valid module config, and it signs as
// the README says; this is what `coxswain serve -f manifests` loads.
func TestManifestSpec(t *testing.T) {
	b, err := os.ReadFile("manifests/route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var specJSON []byte
	for _, doc := range bytes.Split(b, []byte("\n---\n")) {
		var obj struct {
			APIVersion string          `json:"apiVersion"`
			Kind       string          `json:"kind"`
			Spec       json.RawMessage `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj.Kind == hmacsign.API.Kind && obj.APIVersion == hmacsign.API.Group+"/"+hmacsign.API.Version {
			specJSON = obj.Spec
		}
	}
	if specJSON == nil {
		t.Fatal("no HMACSignature in manifests/route.yaml")
	}
	h := filtertest.Start(t, spec(string(specJSON)), filtertest.Options{})
	ex := h.Get(t, "/hello?name=world")
	if ex.Upstream == nil {
		t.Fatalf("status %d, no upstream request", ex.Status)
	}
	want := hmacsign.Signature("demo-key-do-not-use", "GET", "/hello?name=world")
	if got := ex.Upstream.Header.Get("X-Signature"); got != want || ex.Upstream.Header.Get("X-Signature-Key-Id") != "demo-1" {
		t.Errorf("backend saw X-Signature %q key ID %q, want %s and demo-1", got, ex.Upstream.Header.Get("X-Signature-Key-Id"), want)
	}
}
