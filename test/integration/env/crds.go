package env

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns the fields of everything Start applies.
const FieldManager = "coxswain-integration-env"

const gatewayAPIModule = "sigs.k8s.io/gateway-api"

var crdResource = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// installGatewayAPI server-side applies every manifest of the channel's CRD
// directory (CRDs plus the safe-upgrades ValidatingAdmissionPolicy), as
// `kubectl apply --server-side -k` would, and waits until the CRDs are served.
// Server-side apply because the HTTPRoute CRD is larger than the 256 KiB
// last-applied annotation that client-side apply needs.
func installGatewayAPI(ctx context.Context, cfg *rest.Config, dyn dynamic.Interface, channel string) ([]string, error) {
	dir, err := crdDir(ctx, channel)
	if err != nil {
		return nil, err
	}
	objs, err := readManifests(dir)
	if err != nil {
		return nil, err
	}
	return install(ctx, cfg, dyn, objs, dir)
}

// gatewayAPIGlob matches the Gateway API manifests of a directory: the CRDs of
// gateway.networking.k8s.io and gateway.networking.x-k8s.io and the
// safe-upgrades policy, and none of Coxswain's own (deploy/crds holds both).
const gatewayAPIGlob = "gateway.networking*.yaml"

// gatewayAPIFiles are the Gateway API manifest files of dir, sorted.
func gatewayAPIFiles(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, gatewayAPIGlob))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no %s in %s", gatewayAPIGlob, dir)
	}
	slices.Sort(files)
	return files, nil
}

// installGatewayAPIDir server-side applies the Gateway API manifests of dir
// (relative to the repository root unless absolute) and waits until the CRDs
// among them are served.
func (e *Env) installGatewayAPIDir(ctx context.Context, dir string) ([]string, error) {
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(e.Repo, dir)
	}
	files, err := gatewayAPIFiles(dir)
	if err != nil {
		return nil, err
	}
	return installFiles(ctx, e.Config, e.Dynamic, files)
}

// InstallGatewayAPI server-side applies the Gateway API manifests of dir over
// what is installed, as an upgrade of the CRDs in a running cluster would,
// waits until they are served and returns their names. dir is a directory as
// WithGatewayAPIDir takes, or "standard" or "experimental" for a channel of
// the module.
func (e *Env) InstallGatewayAPI(t testing.TB, dir string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var crds []string
	var err error
	if dir == "standard" || dir == "experimental" {
		crds, err = installGatewayAPI(ctx, e.Config, e.Dynamic, dir)
	} else {
		crds, err = e.installGatewayAPIDir(ctx, dir)
	}
	if err != nil {
		t.Fatalf("integration env: installing the Gateway API CRDs of %s: %v", dir, err)
	}
	return crds
}

// coxswainCRDGlob matches the CRDs of Coxswain's own API group that `make
// generate` writes into deploy/crds (the Gateway API's CRDs there are
// installed from the Go module instead, so the two sources cannot differ).
const coxswainCRDGlob = "deploy/crds/gateway.coxswain-labs.dev_*.yaml"

// coxswainCRDFiles are the gateway.coxswain-labs.dev CRD files under repo.
func coxswainCRDFiles(repo string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(repo, coxswainCRDGlob))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no %s under %s (run make generate)", coxswainCRDGlob, repo)
	}
	slices.Sort(files)
	return files, nil
}

// installFiles server-side applies every object of the given manifest files, in
// order, and waits until the CRDs among them are served.
func installFiles(ctx context.Context, cfg *rest.Config, dyn dynamic.Interface, files []string) ([]string, error) {
	var objs []*unstructured.Unstructured
	for _, f := range files {
		got, err := decodeFile(f)
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	return install(ctx, cfg, dyn, objs, strings.Join(files, ", "))
}

// install server-side applies objs and returns the sorted names of the CRDs
// among them once all are served. from names the source in errors.
func install(ctx context.Context, cfg *rest.Config, dyn dynamic.Interface, objs []*unstructured.Unstructured, from string) ([]string, error) {
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	var crds []string
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var res dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			res = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		_, err = res.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return nil, fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		if m.Resource == crdResource {
			crds = append(crds, obj.GetName())
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinition in %s", from)
	}
	slices.Sort(crds)
	return crds, waitServed(ctx, dyn, disc, crds)
}

// InstallCRDs server-side applies the manifests in files (CRDs, and whatever
// cluster-scoped or namespaced objects come with them), waits until the CRDs
// are served, adds their names to e.CRDs and returns them. A relative path is
// relative to the repository root, so a test installs the custom-filter
// example's CRD with
//
//	e.InstallCRDs(t, "examples/custom-filter/crds/hmacsign.example.com_hmacsignatures.yaml")
func (e *Env) InstallCRDs(t testing.TB, files ...string) []string {
	t.Helper()
	abs := make([]string, len(files))
	for i, f := range files {
		abs[i] = f
		if !filepath.IsAbs(f) {
			abs[i] = filepath.Join(e.Repo, f)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crds, err := installFiles(ctx, e.Config, e.Dynamic, abs)
	if err != nil {
		t.Fatalf("integration env: installing %v: %v", files, err)
	}
	e.CRDs = append(e.CRDs, crds...)
	slices.Sort(e.CRDs)
	return crds
}

// crdDir is config/crd/<channel> of the gateway-api module the main module
// requires, so the CRDs always match the Go types the code is built with.
func crdDir(ctx context.Context, channel string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", gatewayAPIModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w: %s", gatewayAPIModule, err, stderr.String())
	}
	moduleDir := strings.TrimSpace(string(out))
	if moduleDir == "" {
		return "", fmt.Errorf("go list -m %s: module not downloaded (run go mod download %s)",
			gatewayAPIModule, gatewayAPIModule)
	}
	dir := filepath.Join(moduleDir, "config", "crd", channel)
	if !exists(dir) {
		return "", fmt.Errorf("no Gateway API channel %q: %s does not exist", channel, dir)
	}
	return dir, nil
}

// readManifests decodes every object in the directory's YAML files, in file
// name order. kustomization.yaml is a build recipe, not an object.
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	slices.Sort(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		got, err := decodeFile(f)
		if err != nil {
			return nil, err
		}
		objs = append(objs, got...)
	}
	return objs, nil
}

func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 64<<10)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if len(m) == 0 { // an empty document between two "---"
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// waitServed waits until every CRD is Established and every served version
// appears in discovery: Established alone can precede the first successful
// request by a few milliseconds.
func waitServed(ctx context.Context, dyn dynamic.Interface, disc discovery.DiscoveryInterface, names []string) error {
	pending := slices.Clone(names)
	var last error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pending = slices.DeleteFunc(pending, func(name string) bool {
			last = crdServed(ctx, dyn, disc, name)
			return last == nil
		})
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("CRDs not served: %v (last: %v): %w", pending, last, err)
	}
	return nil
}

func crdServed(ctx context.Context, dyn dynamic.Interface, disc discovery.DiscoveryInterface, name string) error {
	u, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
		return fmt.Errorf("decoding CRD %s: %w", name, err)
	}
	if !established(&crd) {
		return fmt.Errorf("CRD %s not Established yet", name)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		gv := crd.Spec.Group + "/" + v.Name
		list, err := disc.ServerResourcesForGroupVersion(gv)
		if err != nil {
			return fmt.Errorf("discovery of %s: %w", gv, err)
		}
		if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
			return r.Name == crd.Spec.Names.Plural
		}) {
			return fmt.Errorf("%s/%s not in discovery yet", gv, crd.Spec.Names.Plural)
		}
	}
	return nil
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
