package env

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// Environment variables that steer Start; see the package documentation.
const (
	EnvSkip    = "COXSWAIN_SKIP_INTEGRATION"
	EnvBinDir  = "COXSWAIN_K8S_BIN"
	EnvBuild   = "COXSWAIN_INTEGRATION_BUILD"
	EnvVerbose = "COXSWAIN_INTEGRATION_VERBOSE"
)

// startTimeout bounds each control-plane process's start. The 2-core CI box
// runs several builds and tests at once, so envtest's 20 s default is tight.
const startTimeout = 90 * time.Second

// Env is a running etcd + kube-apiserver with the Gateway API CRDs and
// Coxswain's own (deploy/crds/gateway.coxswain-labs.dev_*.yaml) installed.
// It is stopped by the test's Cleanup.
type Env struct {
	// Config talks to the API server as a system:masters user.
	Config *rest.Config
	// KubeConfig is Config as a kubeconfig file's bytes, for subprocesses
	// (kube-controller-manager, the conformance suite); see WriteKubeConfig.
	KubeConfig []byte
	Kube       kubernetes.Interface
	Gateway    gwclientset.Interface
	Dynamic    dynamic.Interface
	// BinDir holds the binaries build.sh produced.
	BinDir string
	// CRDs are the names of the CustomResourceDefinitions installed: by Start
	// (Gateway API's and gateway.coxswain-labs.dev's), then by InstallCRDs.
	CRDs []string
	// Repo is the repository root, which InstallCRDs resolves relative paths in.
	Repo string
	// out keeps the control plane's output (tail), for RestartAPIServer's process too.
	out *tail
}

type options struct {
	channel        string
	crdDir         string
	apiServerFlags map[string]string
}

// Option changes what Start installs.
type Option func(*options)

// WithChannel installs the CRDs of a Gateway API release channel:
// "standard" (the default) or "experimental".
func WithChannel(channel string) Option {
	return func(o *options) { o.channel = channel }
}

// WithGatewayAPIDir installs the Gateway API manifests of dir instead of a
// channel of the module: every gateway.networking*.yaml file in it (CRDs and
// the safe-upgrades policy), e.g. an older release kept as test data
// (testdata/gateway-api-v1.6.3) or deploy/crds. A relative dir is relative to
// the repository root.
func WithGatewayAPIDir(dir string) Option {
	return func(o *options) { o.crdDir = dir }
}

// WithAPIServerFlag sets a kube-apiserver flag (name without dashes),
// overriding Start's defaults, e.g. WithAPIServerFlag("advertise-address", ip).
func WithAPIServerFlag(name, value string) Option {
	return func(o *options) { o.apiServerFlags[name] = value }
}

// Start launches a fresh control plane on free loopback ports with a
// temporary data directory, installs the Gateway API CRDs, waits until they
// are served, and registers the teardown with t.Cleanup. It skips the test
// only when COXSWAIN_SKIP_INTEGRATION=1; any other problem fails it.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	if os.Getenv(EnvSkip) == "1" {
		t.Skipf("%s=1: skipping a test that needs a real kube-apiserver and etcd", EnvSkip)
	}
	o := options{channel: "standard", apiServerFlags: map[string]string{}}
	for _, opt := range opts {
		opt(&o)
	}
	began := time.Now()
	paths, err := locate()
	if err != nil {
		t.Fatalf("integration env: %v", err)
	}
	ensureBinaries(t, paths)

	out := newTail(64 << 10)
	var w io.Writer = out
	if os.Getenv(EnvVerbose) == "1" {
		w = io.MultiWriter(out, os.Stderr)
	}
	te := newEnvtest(paths.binDir, w, o.apiServerFlags)
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		t.Fatalf("integration env: starting etcd + kube-apiserver from %s: %v\ncontrol-plane output (tail):\n%s",
			paths.binDir, err, out.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("integration env: control-plane output (tail):\n%s", out.String())
		}
		if err := te.Stop(); err != nil {
			t.Errorf("integration env: stopping control plane: %v", err)
		}
	})
	t.Logf("integration env: kube-apiserver at %s ready in %s", cfg.Host, time.Since(began).Round(time.Millisecond))

	e, err := newEnv(cfg, te.KubeConfig, paths.binDir)
	if err != nil {
		t.Fatalf("integration env: clients: %v", err)
	}
	e.out = out
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crdStart := time.Now()
	e.Repo = paths.repo
	from := o.channel
	if o.crdDir != "" {
		from = o.crdDir
		e.CRDs, err = e.installGatewayAPIDir(ctx, o.crdDir)
	} else {
		e.CRDs, err = installGatewayAPI(ctx, cfg, e.Dynamic, o.channel)
	}
	if err != nil {
		t.Fatalf("integration env: installing Gateway API CRDs (%s): %v", from, err)
	}
	own, err := installCoxswainCRDs(ctx, cfg, e.Dynamic, paths.repo)
	if err != nil {
		t.Fatalf("integration env: installing gateway.coxswain-labs.dev CRDs: %v", err)
	}
	t.Logf("integration env: %d Gateway API CRDs (%s) and %d gateway.coxswain-labs.dev CRDs established in %s (total %s)",
		len(e.CRDs), from, len(own), time.Since(crdStart).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	e.CRDs = append(e.CRDs, own...)
	slices.Sort(e.CRDs)
	return e
}

func installCoxswainCRDs(ctx context.Context, cfg *rest.Config, dyn dynamic.Interface, repo string) ([]string, error) {
	files, err := coxswainCRDFiles(repo)
	if err != nil {
		return nil, err
	}
	return installFiles(ctx, cfg, dyn, files)
}

// WriteKubeConfig writes KubeConfig to a file in the test's temp dir and
// returns its path.
func (e *Env) WriteKubeConfig(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, e.KubeConfig, 0o600); err != nil {
		t.Fatalf("integration env: writing kubeconfig: %v", err)
	}
	return path
}

func newEnv(cfg *rest.Config, kubeConfig []byte, binDir string) (*Env, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes clientset: %w", err)
	}
	gw, err := gwclientset.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("gateway-api clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return &Env{Config: cfg, KubeConfig: kubeConfig, Kube: kube, Gateway: gw, Dynamic: dyn, BinDir: binDir}, nil
}

// newEnvtest configures envtest as a plain process launcher: it picks free
// ports, generates serving certs and an admin client cert, and owns the temp
// data dir. Binary paths are set explicitly so a stray KUBEBUILDER_ASSETS
// cannot swap in binaries of another version.
func newEnvtest(binDir string, out io.Writer, flags map[string]string) *envtest.Environment {
	silenceControllerRuntimeLog()
	useExisting := false
	te := &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		UseExistingCluster:       &useExisting,
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := te.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(binDir, "kube-apiserver")
	api.Out, api.Err = out, out
	args := api.Configure()
	// kube-apiserver refuses to start when it cannot pick an address to
	// advertise, which it derives from the default route: absent in a private
	// network namespace or an offline CI box. Loopback works everywhere, and
	// with no endpoint reconciler nothing tries to publish it as the
	// "kubernetes" Service's endpoint (the API rejects loopback endpoints).
	args.Set("advertise-address", "127.0.0.1")
	args.Set("endpoint-reconciler-type", "none")
	for name, value := range flags {
		args.Set(name, value)
	}
	te.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(binDir, "etcd"), Out: out, Err: out}
	return te
}

var silenceOnce sync.Once

// silenceControllerRuntimeLog gives controller-runtime's global logger a sink.
// envtest logs through it; left unset, controller-runtime prints a warning
// with a stack trace 30 s into every test.
func silenceControllerRuntimeLog() {
	silenceOnce.Do(func() { ctrllog.SetLogger(logr.Discard()) })
}
