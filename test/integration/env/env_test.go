package env

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// These tests need no control plane: they cover the parts of Start that run
// before and around the processes.

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		writes []string
		want   string
	}{
		{name: "under limit", max: 8, writes: []string{"abc", "de"}, want: "abcde"},
		{name: "exactly at limit", max: 5, writes: []string{"abc", "de"}, want: "abcde"},
		{name: "keeps the end", max: 4, writes: []string{"abc", "defg"}, want: "defg"},
		{name: "one large write", max: 3, writes: []string{"abcdefgh"}, want: "fgh"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := newTail(tc.max)
			for _, w := range tc.writes {
				if n, err := tl.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := tl.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadManifests(t *testing.T) {
	tests := []struct {
		channel  string
		wantCRDs int
	}{
		{channel: "standard", wantCRDs: 10},
		{channel: "experimental", wantCRDs: 14},
	}
	for _, tc := range tests {
		t.Run(tc.channel, func(t *testing.T) {
			dir, err := crdDir(context.Background(), tc.channel)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := readManifests(dir)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
				if !strings.HasPrefix(o.GetAnnotations()["gateway.networking.k8s.io/bundle-version"], "v1.") {
					t.Errorf("%s %s has no bundle-version annotation", o.GetKind(), o.GetName())
				}
			}
			if kinds["CustomResourceDefinition"] != tc.wantCRDs {
				t.Errorf("CRDs = %d, want %d (kinds: %v)", kinds["CustomResourceDefinition"], tc.wantCRDs, kinds)
			}
			if kinds["ValidatingAdmissionPolicy"] != 1 || kinds["ValidatingAdmissionPolicyBinding"] != 1 {
				t.Errorf("want the safe-upgrades policy and binding, kinds: %v", kinds)
			}
		})
	}
}

func TestLocate(t *testing.T) {
	t.Setenv(EnvBinDir, "")
	p, err := locate()
	if err != nil {
		t.Fatal(err)
	}
	if !exists(p.script) || !exists(p.repo+"/go.mod") {
		t.Errorf("locate() = %+v: build.sh or go.mod missing", p)
	}
	if !strings.HasSuffix(p.binDir, "/.cache/k8s-bin") {
		t.Errorf("default binDir = %q", p.binDir)
	}
	t.Setenv(EnvBinDir, "/elsewhere")
	if p, _ := locate(); p.binDir != "/elsewhere" {
		t.Errorf("binDir with %s set = %q", EnvBinDir, p.binDir)
	}
}

// TestCoxswainCRDFiles: Start finds the generated gateway.coxswain-labs.dev
// CRDs, and they decode as CRDs of that group.
func TestCoxswainCRDFiles(t *testing.T) {
	p, err := locate()
	if err != nil {
		t.Fatal(err)
	}
	files, err := coxswainCRDFiles(p.repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		objs, err := decodeFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			if o.GetKind() != "CustomResourceDefinition" || group != "gateway.coxswain-labs.dev" {
				t.Errorf("%s: %s %s of group %q, want only gateway.coxswain-labs.dev CRDs", f, o.GetKind(), o.GetName(), group)
			}
		}
	}
	if _, err := coxswainCRDFiles(t.TempDir()); err == nil {
		t.Error("coxswainCRDFiles found CRDs in an empty directory")
	}
}
