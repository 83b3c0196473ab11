package env_test

import (
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestStart checks the environment on its own, outside any network
// namespace: the binaries are the pinned build and the kubeconfig handed to
// subprocesses reaches the same server.
func TestStart(t *testing.T) {
	e := env.Start(t)
	if len(e.CRDs) != 10 {
		t.Errorf("CRDs = %v, want the 10 standard-channel CRDs", e.CRDs)
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
