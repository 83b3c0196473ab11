package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/coxswain-labs/coxswain/cmd/coxswain/internal/gen/translateimports"
)

// TestGeneratedTranslateImports fails when zz_generated_translate.go is not what the generator
// writes from modules/standard.Packages today: a module package gained or lost a translate/
// half, or the list changed. Fix it with `go generate ./cmd/coxswain`.
func TestGeneratedTranslateImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	want, err := translateimports.Generate(context.Background(), ".")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("zz_generated_translate.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("zz_generated_translate.go is stale; run go generate ./cmd/coxswain. Want:\n%s", want)
	}
	if !bytes.Contains(want, []byte(`_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"`)) {
		t.Fatalf("the generated imports miss httproute's controller half:\n%s", want)
	}
}
