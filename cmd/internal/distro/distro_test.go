package distro

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTranslateHalves: P/translate is found when it has Go files, and absent when the directory
// is missing, empty, or outside every required module.
func TestTranslateHalves(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":                   "module example.com/m\n\ngo 1.26\n",
		"a/a.go":                   "package a\n",
		"a/translate/translate.go": "package translate\n",
		"b/b.go":                   "package b\n",
		"c/c.go":                   "package c\n",
		"c/translate/README":       "no Go files here\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := TranslateHalves(context.Background(), dir, []string{"GOFLAGS=-mod=mod", "GOPROXY=off"},
		[]string{"example.com/m/b", "example.com/m/a", "example.com/m/c", "example.org/elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"example.com/m/a/translate"}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestFile(t *testing.T) {
	src, err := File("// Code generated; DO NOT EDIT.\n", "main",
		[]Imports{{Comment: "first", Paths: []string{"x/a", "x/b"}}, {Paths: nil}, {Comment: "second", Paths: []string{"x/c"}}},
		[]string{"x/cmd"}, "func main() { cmd.Main() }\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"package main", "\t\"x/cmd\"\n\n\t// first\n\t_ \"x/a\"\n\t_ \"x/b\"\n\n\t// second\n\t_ \"x/c\"\n)", "func main() { cmd.Main() }"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("the file lacks %q:\n%s", want, src)
		}
	}
}
