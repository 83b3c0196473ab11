package standalone

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// fuzzExamples are the example directories whose manifests seed the fuzz targets below.
var fuzzExamples = []string{"quickstart", "l4", "filters", "policies", "grpc", "retries", "mirror-cors"}

// exampleFiles returns the manifest files of the examples, by path.
func exampleFiles(f *testing.F) map[string][]byte {
	f.Helper()
	out := map[string][]byte{}
	for _, ex := range fuzzExamples {
		files, err := ListFiles(filepath.Join("..", "..", "examples", ex))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			out[file] = b
		}
	}
	return out
}

// FuzzLoadManifest loads one manifest file, YAML or JSON, the way `coxswain serve -f` does, and
// translates what loaded: any bytes give either objects or errors that name the file and a reason,
// never a panic; nothing is loaded twice under one name; and translation copes with whatever
// passed the loader.
func FuzzLoadManifest(f *testing.F) {
	for _, b := range exampleFiles(f) {
		f.Add(b, false)
	}
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}}]}`), true)
	f.Add([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: a}\n"), false)
	f.Add([]byte("a: [1, 2\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		name := "m.yaml"
		if asJSON {
			name = "m.json"
		}
		file := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := Load(context.Background(), file, nil)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		for _, e := range res.Errors {
			if e.Source.File != file || e.Reason == "" || e.Message == "" {
				t.Fatalf("an error without its file, reason or message: %+v", e)
			}
		}
		for ref, src := range res.Sources {
			if src.File != file || ref.Name == "" {
				t.Fatalf("%v loaded from %+v", ref, src)
			}
		}
		tr := translator.Translate(context.Background(), res.Store, translator.Options{AllowLoopbackEndpoints: true})
		if tr.Snapshot == nil {
			t.Fatal("translation gave no snapshot")
		}
	})
}

// FuzzSnapshot decodes IR snapshots the way a proxy does (agent.apply: proto.Unmarshal) and
// compiles them as Apply would (proxy.Check): any bytes are refused with an error or compile and
// clean up, never a panic. The seeds are the examples' own snapshots, so the fuzzer mutates real
// listeners, routes, filters and clusters.
func FuzzSnapshot(f *testing.F) {
	dirs := map[string]bool{}
	for file := range exampleFiles(f) {
		dirs[filepath.Dir(file)] = true
	}
	for dir := range dirs {
		res, err := Load(context.Background(), dir, nil)
		if err != nil {
			f.Fatal(err)
		}
		tr := translator.Translate(context.Background(), res.Store, translator.Options{AllowLoopbackEndpoints: true})
		b, err := proto.Marshal(tr.Snapshot)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	p := proxy.New(proxy.Options{Log: zap.NewNop(), Registry: core.Freeze()})
	f.Cleanup(func() { _ = p.Close(context.Background()) })
	f.Fuzz(func(t *testing.T, b []byte) {
		snap := &irv1.Snapshot{}
		if err := proto.Unmarshal(b, snap); err != nil {
			return
		}
		if err := p.Check(context.Background(), snap); err != nil && strings.TrimSpace(err.Error()) == "" {
			t.Fatal("an empty error")
		}
	})
}
