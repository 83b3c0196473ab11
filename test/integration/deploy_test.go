package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

const (
	crdDir             = "../../deploy/crds"
	controllerNS       = "coxswain-system"
	controllerSA       = "system:serviceaccount:" + controllerNS + ":coxswain-controller"
	deployFieldManager = "coxswain-deploy-test"
)

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

// TestDeployManifests keeps what users install honest: deploy/crds are upstream's and the charts
// carry them unchanged, both charts lint, every object the charts render (default values and the
// charts' ci/ values files) passes a server-side dry run against the real API server with no
// warning, and the controller runs as the chart's ServiceAccount with exactly the chart's RBAC.
func TestDeployManifests(t *testing.T) {
	e := env.Start(t)
	kubeVersion := serverVersion(t, e)

	t.Run("CRDs are upstream's", func(t *testing.T) {
		upstream := filepath.Join(gatewayAPIModuleDir(t), "config", "crd", "standard")
		files, err := filepath.Glob(filepath.Join(upstream, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no CRDs in %s: %v", upstream, err)
		}
		for _, f := range files {
			want, _ := os.ReadFile(f)
			got, err := os.ReadFile(filepath.Join(crdDir, filepath.Base(f)))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("deploy/crds/%s differs from %s (copy it again after a Gateway API upgrade): %v", filepath.Base(f), f, err)
			}
		}
	})

	t.Run("the charts carry deploy/crds unchanged", func(t *testing.T) {
		sameFiles(t, filepath.Join(chartDir, "crds"), filesByBase(t, filepath.Join(crdDir, "gateway.*.yaml")))
		sameFiles(t, filepath.Join(crdsChartDir, "files", "gateway-api", "standard"),
			filesByBase(t, filepath.Join(crdDir, "gateway.networking.k8s.io_*.yaml")))
		sameFiles(t, filepath.Join(crdsChartDir, "files", "coxswain"),
			filesByBase(t, filepath.Join(crdDir, "gateway.coxswain-labs.dev_*.yaml")))
		sameFiles(t, filepath.Join(crdsChartDir, "files", "gateway-api", "experimental"),
			filesByBase(t, filepath.Join(gatewayAPIModuleDir(t), "config", "crd", "experimental", "gateway.*.yaml")))
	})

	t.Run("helm lint", func(t *testing.T) {
		for _, values := range chartValueSets(t) {
			runHelm(t, append([]string{"lint", "--strict", "--quiet", "--kube-version", kubeVersion, chartDir}, values...)...)
		}
		for _, channel := range []string{"standard", "experimental"} {
			runHelm(t, "lint", "--strict", "--quiet", "--kube-version", kubeVersion, crdsChartDir, "--set", "gatewayAPI.channel="+channel)
		}
	})

	ap := newApplier(t, e)
	// The chart installs into a namespace the user creates (helm --create-namespace, or their own
	// with the restricted Pod Security label docs/install.md shows): the dry runs below get the
	// API server's Pod Security warnings for every pod template in it.
	restrictedNamespace(t, e, controllerNS)
	e.InstallCRDs(t, "test/integration/testdata/prometheus-operator/crds.yaml")
	objs := renderChart(t, chartDir, kubeVersion)

	t.Run("server-side dry run", func(t *testing.T) {
		for _, values := range chartValueSets(t) {
			dryRunAll(t, ap, renderChart(t, chartDir, kubeVersion, append(values, "--include-crds")...))
		}
		// The CRDs chart, standard channel: an update of what the env installed (the experimental
		// channel is TestCRDsChartExperimental's).
		crds := renderChart(t, crdsChartDir, kubeVersion)
		for _, o := range crds {
			if o.GetKind() == "CustomResourceDefinition" && o.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("%s: no helm.sh/resource-policy: keep annotation", objectID(o))
			}
		}
		dryRunAll(t, ap, crds)
	})

	t.Run("controller runs with exactly the chart's RBAC", func(t *testing.T) {
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
	t.Run("discovery runs with the chart's RBAC; proxies have none", func(t *testing.T) { deployDiscoveryRBAC(t, e) })
	t.Run("shared-mode provisioning runs with the chart's RBAC", func(t *testing.T) { deployProvisioningRBAC(t, e) })
	t.Run("dedicated-mode provisioning runs with the chart's RBAC", func(t *testing.T) { deployDedicatedRBAC(t, e) })
}

// TestCRDsChartExperimental dry-runs the coxswain-crds chart's experimental channel against an API
// server that serves that channel (an upgrade from standard is the safe-upgrades policy's call).
func TestCRDsChartExperimental(t *testing.T) {
	e := env.Start(t, env.WithChannel("experimental"))
	objs := renderChart(t, crdsChartDir, serverVersion(t, e), "--set", "gatewayAPI.channel=experimental")
	var kinds []string
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			kinds = append(kinds, o.GetName())
		}
	}
	if !slices.Contains(kinds, "xbackendtrafficpolicies.gateway.networking.x-k8s.io") {
		t.Errorf("the experimental channel renders no x-k8s.io CRDs: %v", kinds)
	}
	dryRunAll(t, newApplier(t, e), objs)
}

// chartValueSets are the coxswain chart's renderings make test checks: the default values, and
// each values file in the chart's ci/ directory (dedicated mode, the autoscaled shared pool).
func chartValueSets(t testing.TB) [][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files in %s/ci: %v", chartDir, err)
	}
	sets := [][]string{nil}
	for _, f := range files {
		sets = append(sets, []string{"-f", f})
	}
	return sets
}

// dryRunAll server-side applies objs with dryRun=All, failing on any error or API server warning.
func dryRunAll(t *testing.T, ap *applier, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if err := ap.apply(t, o, true); err != nil {
			t.Errorf("%s: %v", objectID(o), err)
		}
		for _, w := range ap.warnings.take() {
			t.Errorf("%s: API server warning: %s", objectID(o), w)
		}
	}
}

func restrictedNamespace(t testing.TB, e *env.Env, name string) {
	t.Helper()
	_, err := e.Kube.CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func serverVersion(t testing.TB, e *env.Env) string {
	t.Helper()
	v, err := e.Kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	return v.GitVersion
}

func gatewayAPIModuleDir(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// checkAccess asks the API server what the controller's service account may do: issue 15's table
// row by row, the extra rows docs/rbac.md justifies, and a sample of what it must not.
func checkAccess(t *testing.T, e *env.Env) {
	t.Helper()
	type access struct {
		ns, group, resource, sub, verb string
		allowed                        bool
	}
	var checks []access
	allow := func(ns, group, resource, sub string, verbs ...string) {
		for _, v := range verbs {
			checks = append(checks, access{ns, group, resource, sub, v, true})
		}
	}
	deny := func(ns, group, resource, sub string, verbs ...string) {
		for _, v := range verbs {
			checks = append(checks, access{ns, group, resource, sub, v, false})
		}
	}
	const gw, cx, net = gwapiv1.GroupName, "gateway.coxswain-labs.dev", "networking.k8s.io"
	// The table.
	for _, r := range []string{"httproutes", "gateways", "referencegrants", "backendtlspolicies", "gatewayclasses"} {
		allow("", gw, r, "", "get", "list", "watch")
	}
	allow("", net, "ingresses", "", "get", "list", "watch")
	allow("", net, "ingressclasses", "", "get", "list", "watch")
	for _, r := range []string{"services", "secrets", "configmaps"} {
		allow("", "", r, "", "get", "list", "watch")
	}
	allow("", "discovery.k8s.io", "endpointslices", "", "get", "list", "watch")
	allow("", gw, "httproutes", "status", "update", "patch")
	allow("", gw, "gateways", "status", "update", "patch")
	allow("", net, "ingresses", "status", "update", "patch")
	allow("", gw, "gateways", "", "patch")
	allow("", "apps", "deployments", "", "create", "update", "delete")
	allow("", "", "services", "", "create", "update", "delete")
	allow("", "", "serviceaccounts", "", "create", "update", "delete")
	allow(controllerNS, "coordination.k8s.io", "leases", "", "get", "create", "patch")
	allow("", "authentication.k8s.io", "tokenreviews", "", "create")
	// Beyond the table (docs/rbac.md).
	for _, r := range []string{"grpcroutes", "tcproutes", "tlsroutes", "udproutes", "listenersets"} {
		allow("", gw, r, "", "get", "list", "watch")
		allow("", gw, r, "status", "update")
		deny("", gw, r, "status", "patch")
	}
	allow("", gw, "gatewayclasses", "status", "update")
	allow("", gw, "backendtlspolicies", "status", "update")
	allow("", gw, "gateways", "finalizers", "update")
	allow(controllerNS, "coordination.k8s.io", "leases", "", "update")
	// Drift repair's informers and server-side apply of what the controller provisions.
	allow("", "apps", "deployments", "", "get", "list", "watch", "patch")
	allow("", "", "services", "", "patch")
	allow("", "", "serviceaccounts", "", "get", "list", "watch", "patch")
	allow("", "autoscaling", "horizontalpodautoscalers", "", "get", "list", "watch", "create", "update", "patch", "delete")
	allow("", "policy", "poddisruptionbudgets", "", "get", "list", "watch", "create", "update", "patch", "delete")
	allow("", "", "configmaps", "", "create", "update", "patch", "delete")
	allow("", "", "namespaces", "", "get", "list", "watch")
	allow("", "certificates.k8s.io", "clustertrustbundles", "", "list", "watch")
	allow("", "apiextensions.k8s.io", "customresourcedefinitions", "", "get", "list", "watch")
	allow("", cx, "ratelimits", "", "get", "list", "watch")
	allow("", cx, "coxswaingatewayparameters", "", "get", "list", "watch")
	for _, r := range []string{"coxswainbackendpolicies", "clienttrafficpolicies", "coxswainexternalauths"} {
		allow("", cx, r, "", "get", "list", "watch")
		allow("", cx, r, "status", "update")
		deny("", cx, r, "", "update", "create", "delete")
	}
	allow("", "", "events", "", "create", "patch", "list", "watch")
	allow("", "events.k8s.io", "events", "", "create", "patch", "list", "watch")
	// The admin API's authorisation of its callers (docs/admin-api.md).
	allow("", "authorization.k8s.io", "subjectaccessreviews", "", "create")
	allow("", "", "pods", "", "get", "list")
	allow("", "", "pods", "log", "get")
	allow(controllerNS, "", "secrets", "", "create")
	// Never.
	for _, r := range []string{"httproutes", "grpcroutes", "gatewayclasses", "referencegrants", "backendtlspolicies"} {
		deny("", gw, r, "", "create", "update", "patch", "delete")
	}
	deny("", gw, "gateways", "", "create", "update", "delete")
	deny("", gw, "gatewayclasses", "status", "patch")
	deny("", net, "ingresses", "", "create", "update", "delete")
	deny("", "", "secrets", "", "update", "patch", "delete")
	deny("default", "", "secrets", "", "create")
	deny("", "", "namespaces", "", "create", "update", "delete")
	// The shared pool's pods, published as the VIP Services' endpoints: watched in the
	// controller's namespace only.
	allow(controllerNS, "", "pods", "", "list", "watch")
	allow("", "discovery.k8s.io", "endpointslices", "", "create", "patch", "delete")
	deny("", "", "pods", "", "create", "update", "delete", "watch")
	deny("default", "", "pods", "", "watch")
	deny("", "", "pods", "exec", "create")
	deny("", "discovery.k8s.io", "endpointslices", "", "update", "deletecollection")
	deny(controllerNS, "coordination.k8s.io", "leases", "", "delete")
	deny("default", "coordination.k8s.io", "leases", "", "get", "update")
	deny("", cx, "ratelimits", "", "update", "create", "delete")
	deny("", "apiextensions.k8s.io", "customresourcedefinitions", "", "create", "update", "delete")
	deny("", "rbac.authorization.k8s.io", "clusterroles", "", "create", "update", "bind", "escalate")
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
