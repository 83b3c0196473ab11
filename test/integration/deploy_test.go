package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

const (
	deployDir          = "../../deploy"
	controllerNS       = "coxswain-system"
	controllerSA       = "system:serviceaccount:" + controllerNS + ":coxswain-controller"
	deployFieldManager = "coxswain-deploy-test"
)

// kustomization is the subset of kustomize the deploy/ manifests use: a list of files and
// directories. Decoding is strict, so a field added to a kustomization.yaml fails this test until
// the renderer below understands it.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// render reads the kustomization in dir, as `kubectl kustomize dir` would.
func render(dir string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		path := filepath.Join(dir, r)
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		var objs []*unstructured.Unstructured
		if fi.IsDir() {
			objs, err = render(path)
		} else {
			objs, err = decodeManifests(path)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func decodeManifests(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func objectID(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

// applier server-side applies manifests through the dynamic client, collecting the warnings the
// API server returns (deprecated APIs, Pod Security violations of a workload's pod template).
type applier struct {
	dyn      dynamic.Interface
	mapper   meta.RESTMapper
	warnings *warnings
}

type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

func newApplier(t testing.TB, e *env.Env) *applier {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc := memory.NewMemCacheClient(e.Kube.Discovery())
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(disc), warnings: w}
}

func (a *applier) apply(t testing.TB, u *unstructured.Unstructured, dryRun bool) error {
	t.Helper()
	m, err := a.mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
	if err != nil {
		return err
	}
	opts := metav1.ApplyOptions{FieldManager: deployFieldManager, Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	res := a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		_, err = res.Namespace(u.GetNamespace()).Apply(ctxFor(t), u.GetName(), u, opts)
	} else {
		_, err = res.Apply(ctxFor(t), u.GetName(), u, opts)
	}
	return err
}

// TestDeployManifests keeps deploy/ honest: the CRDs are upstream's, the manifests pass a
// server-side dry run against the real API server, and the controller runs as the service
// account with exactly the RBAC the manifests grant.
func TestDeployManifests(t *testing.T) {
	e := env.Start(t)
	objs, err := render(deployDir)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("CRDs are upstream's", func(t *testing.T) {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
		if err != nil {
			t.Fatal(err)
		}
		upstream := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
		files, err := filepath.Glob(filepath.Join(upstream, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no CRDs in %s: %v", upstream, err)
		}
		for _, f := range files {
			want, _ := os.ReadFile(f)
			got, err := os.ReadFile(filepath.Join(deployDir, "crds", filepath.Base(f)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("deploy/crds/%s differs from %s (copy it again after a Gateway API upgrade): %v", filepath.Base(f), f, err)
			}
		}
	})

	t.Run("kubectl kustomize renders the same objects", func(t *testing.T) {
		if _, err := exec.LookPath("kubectl"); err != nil {
			t.Skip("kubectl not installed; the renderer above is the only check")
		}
		out, err := exec.Command("kubectl", "kustomize", deployDir).Output()
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "rendered.yaml")
		if err := os.WriteFile(f, out, 0o600); err != nil {
			t.Fatal(err)
		}
		theirs, err := decodeManifests(f)
		if err != nil {
			t.Fatal(err)
		}
		var a, b []string
		for _, o := range objs {
			a = append(a, objectID(o))
		}
		for _, o := range theirs {
			b = append(b, objectID(o))
		}
		slices.Sort(a)
		slices.Sort(b)
		if !slices.Equal(a, b) {
			t.Errorf("our rendering %v\nkubectl's %v", a, b)
		}
	})

	ap := newApplier(t, e)
	t.Run("server-side dry run", func(t *testing.T) {
		// Namespaced objects can only be dry-run into a namespace that exists.
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				if err := ap.apply(t, o, false); err != nil {
					t.Fatalf("%s: %v", objectID(o), err)
				}
			}
		}
		for _, o := range objs {
			if err := ap.apply(t, o, true); err != nil {
				t.Errorf("%s: %v", objectID(o), err)
			}
			for _, w := range ap.warnings.take() {
				t.Errorf("%s: API server warning: %s", objectID(o), w)
			}
		}
	})

	t.Run("controller runs with exactly the manifests' RBAC", func(t *testing.T) {
		for _, o := range objs {
			switch o.GetKind() {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				if err := ap.apply(t, o, false); err != nil {
					t.Fatalf("%s: %v", objectID(o), err)
				}
			}
		}
		checkAccess(t, e)

		cfg := rest.CopyConfig(e.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA}
		ctl := startController(t, e, controllerOpts{config: cfg, leaseNamespace: controllerNS})
		ns := namespace(t, e, "rbac", nil)
		startBackend(t, "rbac", "10.99.6.1:8080")
		createService(t, e, ns, "svc", "10.99.6.1")
		cert := tlsSecret(t, e, ns, "cert", "rbac.example")
		createClass(t, e, "rbac", "")
		createGateway(t, e, ns, "gw", "rbac", httpsListener("https", 18400, "rbac.example", certRef("", "cert")))
		createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("svc", 1))))
		waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, accepted, programmed); err != nil {
				return err
			}
			return listenerConds(gw, "https", listenerHealthy...)
		})
		waitRouteParent(t, e, ns, "r", "", "", accepted, resolved)
		httpsServed(t, 18400, "rbac.example", cert, "rbac")
		if !ctl.Stats().Leading.Load() {
			t.Error("the controller is not leading on its Lease in " + controllerNS)
		}
	})
	t.Run("discovery runs with the manifests' RBAC; proxies have none", func(t *testing.T) { deployDiscoveryRBAC(t, e) })
	t.Run("shared-mode provisioning runs with the manifests' RBAC", func(t *testing.T) { deployProvisioningRBAC(t, e) })
}

// checkAccess asks the API server what the controller's service account may do: everything the
// controller needs, and a sample of what it must not.
func checkAccess(t *testing.T, e *env.Env) {
	t.Helper()
	type access struct {
		ns, group, resource, sub, verb string
		allowed                        bool
	}
	gw := gwapiv1.GroupName
	var checks []access
	for _, r := range []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "tcproutes", "tlsroutes", "udproutes"} {
		for _, v := range []string{"get", "list", "watch"} {
			checks = append(checks, access{"", gw, r, "", v, true})
		}
		checks = append(checks, access{"", gw, r, "status", "update", true},
			access{"", gw, r, "status", "patch", false}, access{"", gw, r, "", "update", false},
			access{"", gw, r, "", "create", false}, access{"", gw, r, "", "delete", false})
	}
	const cx = "gateway.coxswain-labs.dev"
	for _, policies := range []string{"coxswainbackendpolicies", "clienttrafficpolicies", "coxswainexternalauths"} {
		checks = append(checks, access{"", cx, policies, "", "get", true}, access{"", cx, policies, "", "list", true},
			access{"", cx, policies, "", "watch", true}, access{"", cx, policies, "status", "update", true},
			access{"", cx, policies, "status", "patch", false}, access{"", cx, policies, "", "update", false},
			access{"", cx, policies, "", "create", false})
	}
	checks = append(checks, access{"", cx, "ratelimits", "", "get", false})
	for _, r := range []string{"services", "namespaces", "secrets"} {
		checks = append(checks, access{"", "", r, "", "list", true}, access{"", "", r, "", "watch", true},
			access{"", "", r, "", "get", false}, access{"", "", r, "", "update", false})
	}
	checks = append(checks,
		access{"", gw, "referencegrants", "", "list", true}, access{"", gw, "referencegrants", "", "watch", true},
		access{"", "discovery.k8s.io", "endpointslices", "", "list", true},
		access{"", "discovery.k8s.io", "endpointslices", "", "watch", true},
		access{controllerNS, "coordination.k8s.io", "leases", "", "get", true},
		access{controllerNS, "coordination.k8s.io", "leases", "", "create", true},
		access{controllerNS, "coordination.k8s.io", "leases", "", "update", true},
		access{controllerNS, "coordination.k8s.io", "leases", "", "delete", false},
		access{"default", "coordination.k8s.io", "leases", "", "update", false},
		access{"", "", "pods", "", "list", false},
		// BackendTLSPolicy CA bundles: ConfigMaps are listed and watched. The dedicated mode writes a
		// copy of the discovery trust bundle next to each dedicated Gateway (docs/dedicated.md), so
		// the controller may write ConfigMaps in any namespace.
		access{"", "", "configmaps", "", "list", true}, access{"", "", "configmaps", "", "watch", true},
		access{"default", "", "configmaps", "", "patch", true},
		// The dedicated mode's proxy pools: Deployments (cached for drift repair), HPAs and PDBs;
		// never pods themselves.
		access{"default", "apps", "deployments", "", "patch", true}, access{"", "apps", "deployments", "", "watch", true},
		access{"default", "autoscaling", "horizontalpodautoscalers", "", "delete", true},
		access{"default", "policy", "poddisruptionbudgets", "", "patch", true},
		access{"default", "", "pods", "", "create", false}, access{"default", "apps", "daemonsets", "", "create", false},
		access{"", gw, "backendtlspolicies", "", "list", true}, access{"", gw, "backendtlspolicies", "", "watch", true},
		access{"", gw, "backendtlspolicies", "", "get", true}, access{"", gw, "backendtlspolicies", "status", "update", true},
		access{"", gw, "backendtlspolicies", "", "update", false},
		// Shared-mode provisioning: VIP Services and identity ServiceAccounts, never read one by one.
		access{"", "", "services", "", "create", true}, access{"", "", "services", "", "patch", true},
		access{"", "", "services", "", "delete", true},
		access{"", "", "serviceaccounts", "", "create", true}, access{"", "", "serviceaccounts", "", "patch", true},
		access{"", "", "serviceaccounts", "", "watch", true}, access{"", "", "serviceaccounts", "", "get", false},
		access{"", gw, "gateways", "finalizers", "update", true},
	)
	for _, c := range checks {
		sar, err := e.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctxFor(t), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: controllerSA,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + controllerNS, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Group: c.group, Resource: c.resource, Subresource: c.sub, Verb: c.verb}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.allowed {
			t.Errorf("%s %s/%s/%s in %q: allowed=%v, want %v", c.verb, c.group, c.resource, c.sub, c.ns, sar.Status.Allowed, c.allowed)
		}
	}
}
