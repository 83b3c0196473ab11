package env_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestStart checks the environment on its own, outside any network
// namespace: the binaries are the pinned build and the kubeconfig handed to
// subprocesses reaches the same server.
func TestStart(t *testing.T) {
	e := env.Start(t)
	own := 0
	for _, c := range e.CRDs {
		if strings.HasSuffix(c, ".gateway.coxswain-labs.dev") {
			own++
		}
	}
	if len(e.CRDs)-own != 10 || !slices.Contains(e.CRDs, "pathrewriteregexes.gateway.coxswain-labs.dev") ||
		!slices.Contains(e.CRDs, "ipaccesscontrols.gateway.coxswain-labs.dev") || !slices.Contains(e.CRDs, "requestsizelimits.gateway.coxswain-labs.dev") {
		t.Errorf("CRDs = %v, want the 10 standard-channel CRDs and gateway.coxswain-labs.dev's", e.CRDs)
	}
	v, err := e.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.GitVersion != "v1.37.2" {
		t.Errorf("server version = %s, want v1.37.2 (build.sh ldflags)", v.GitVersion)
	}

	raw, err := os.ReadFile(e.WriteKubeConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		t.Errorf("server version through the kubeconfig: %v", err)
	}
}

// TestInstallCRDs installs the custom-filter example's CRD and checks the API
// server enforces what controller-gen generated from the module's Config: the
// header default and the required key; and Coxswain's own PathRewriteRegex
// rejects an empty pattern.
func TestInstallCRDs(t *testing.T) {
	e := env.Start(t)
	got := e.InstallCRDs(t, "examples/custom-filter/crds/hmacsign.example.com_hmacsignatures.yaml")
	if !slices.Equal(got, []string{"hmacsignatures.hmacsign.example.com"}) || !slices.Contains(e.CRDs, got[0]) {
		t.Fatalf("InstallCRDs = %v, e.CRDs = %v", got, e.CRDs)
	}
	hmacs := e.Dynamic.Resource(schema.GroupVersionResource{Group: "hmacsign.example.com", Version: "v1",
		Resource: "hmacsignatures"}).Namespace("default")
	created, err := hmacs.Create(t.Context(), object("hmacsign.example.com/v1", "HMACSignature", "sign",
		map[string]any{"key": "k"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := unstructured.NestedString(created.Object, "spec", "header"); h != "x-signature" {
		t.Errorf("spec.header = %q, want the CRD default x-signature", h)
	}
	if _, err := hmacs.Create(t.Context(), object("hmacsign.example.com/v1", "HMACSignature", "nokey",
		map[string]any{"header": "x-s"}), metav1.CreateOptions{}); err == nil {
		t.Error("an HMACSignature without spec.key was accepted")
	}
	prrs := e.Dynamic.Resource(schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1",
		Resource: "pathrewriteregexes"}).Namespace("default")
	if _, err := prrs.Create(t.Context(), object("gateway.coxswain-labs.dev/v1alpha1", "PathRewriteRegex", "empty",
		map[string]any{"pattern": ""}), metav1.CreateOptions{}); err == nil {
		t.Error("a PathRewriteRegex with an empty pattern was accepted")
	}
	if _, err := prrs.Create(t.Context(), object("gateway.coxswain-labs.dev/v1alpha1", "PathRewriteRegex", "ok",
		map[string]any{"pattern": "^/v1/(.*)", "substitution": "/$1"}), metav1.CreateOptions{}); err != nil {
		t.Errorf("a valid PathRewriteRegex: %v", err)
	}
}

func object(apiVersion, kind, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     spec,
	}}
}
