package conformance

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/apis/v1alpha2"
	"sigs.k8s.io/gateway-api/apis/v1alpha3"
	xv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	upstream "sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	"sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/flags"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/test/conformance/harness"
	"github.com/coxswain-labs/coxswain/test/integration/netns"
)

// Environment variables run.sh sets.
const (
	// EnvReport is where the upstream-format report goes; the artifacts directory when unset.
	EnvReport = "COXSWAIN_CONFORMANCE_REPORT"
	// EnvVersion is the implementation version the report names.
	EnvVersion = "COXSWAIN_VERSION"
)

// gatewayClassName is the GatewayClass the suite's Gateways use.
const gatewayClassName = "coxswain"

// gatewayProfiles are the profiles a Gateway implementation can claim. A profile runs when the
// build claims every one of its core features; the mesh profiles are not for a Gateway.
var gatewayProfiles = []suite.ConformanceProfile{
	suite.GatewayHTTPConformanceProfile,
	suite.GatewayGRPCConformanceProfile,
	suite.GatewayTLSConformanceProfile,
	suite.GatewayTCPConformanceProfile,
	suite.GatewayUDPConformanceProfile,
}

func TestMain(m *testing.M) { os.Exit(netns.Run(m)) }

// TestConformance runs the upstream suite against the whole stack, on the CRDs of one Gateway API
// release channel (harness.EnvChannel; run.sh runs it once per channel). The features under test
// are the ones the GatewayClass status claims (the suite reads them itself), and the profiles are
// the ones whose core features are all claimed: what is advertised is what is tested. On the
// experimental channel the controller serves the fields that exist only there, so it claims, and
// the suite tests, the features that need them as well as everything the standard run tests.
func TestConformance(t *testing.T) {
	c := harness.Start(t)
	gc := c.GatewayClass(t, gatewayClassName)
	claimed := sets.New[features.FeatureName]()
	for _, f := range gc.Status.SupportedFeatures {
		claimed.Insert(features.FeatureName(f.Name))
	}
	profiles := profilesFor(claimed)
	t.Logf("Gateway API %s channel: GatewayClass %s claims %d features: %v", c.Channel, gc.Name, claimed.Len(), sets.List(claimed))
	t.Logf("of which upstream files under the experimental channel: %v", experimentalOnly(claimed))
	t.Logf("conformance profiles: %v", profiles)
	if len(profiles) == 0 {
		t.Fatal("the build claims no complete Gateway conformance profile")
	}
	if !t.Run("Harness", func(t *testing.T) { checkHarness(t, c) }) {
		t.FailNow()
	}
	upstream.RunConformanceWithOptions(t, suiteOptions(t, c, profiles))
}

// experimentalOnly are the claimed features upstream files under the experimental channel. Most
// need fields only the experimental CRDs have, so only the experimental run claims and tests them.
func experimentalOnly(claimed sets.Set[features.FeatureName]) []features.FeatureName {
	var out []features.FeatureName
	for _, f := range sets.List(claimed) {
		if features.GetFeature(f).Channel == features.FeatureChannelExperimental {
			out = append(out, f)
		}
	}
	return out
}

func profilesFor(claimed sets.Set[features.FeatureName]) []suite.ConformanceProfileName {
	var out []suite.ConformanceProfileName
	for _, p := range gatewayProfiles {
		if claimed.IsSuperset(p.CoreFeatures) {
			out = append(out, p.Name)
		}
	}
	return out
}

// suiteOptions are upstream's DefaultOptions with the harness's client and the report settings;
// the suite's own flags (-run-test, -skip-tests, -debug, ...) still apply when given.
func suiteOptions(t *testing.T, c *harness.Cluster, profiles []suite.ConformanceProfileName) suite.ConformanceOptions {
	t.Helper()
	cl, err := client.New(c.Env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, install := range []func(*runtime.Scheme) error{
		v1alpha3.Install, v1alpha2.Install, xv1alpha1.Install, gwapiv1.Install, apiextensionsv1.AddToScheme,
	} {
		if err := install(cl.Scheme()); err != nil {
			t.Fatal(err)
		}
	}
	report := os.Getenv(EnvReport)
	if report == "" {
		report = filepath.Join(c.Artifacts, "report.yaml")
	}
	version := os.Getenv(EnvVersion)
	if version == "" {
		version = "dev"
	}
	opts := suite.ConfigurableOptions{
		GatewayClassName:     gatewayClassName,
		CleanupBaseResources: true,
		CleanupTestResources: true,
		Mode:                 flags.DefaultMode,
		TimeoutConfig:        config.DefaultTimeoutConfig(),
		ConformanceProfiles:  profiles,
		ReportOutputPath:     report,
		Implementation: confv1.Implementation{
			Organization: "coxswain-labs",
			Project:      "coxswain",
			URL:          "https://github.com/coxswain-labs/coxswain",
			Version:      version,
			Contact:      []string{"https://github.com/coxswain-labs/coxswain/issues"},
		},
	}
	// GatewayStaticAddresses: one address a Gateway can have and one it cannot (flags
	// -usable-address and -unusable-address override them): in shared mode a free cluster IP
	// and one outside the ServiceCIDR; in pool mode one the proxy can bind and one it cannot.
	ip := gwapiv1.IPAddressType
	opts.UsableNetworkAddresses = []gwapiv1.GatewaySpecAddress{{Type: &ip, Value: c.UsableAddress}}
	opts.UnusableNetworkAddresses = []gwapiv1.GatewaySpecAddress{{Type: &ip, Value: harness.UnusableAddress}}
	flags.ApplyAll(&opts)
	if !slices.Equal(opts.ConformanceProfiles, profiles) {
		t.Logf("profiles overridden by -conformance-profiles: %v", opts.ConformanceProfiles)
	}
	return suite.ConformanceOptions{
		ConfigurableOptions: opts,
		Client:              cl,
		Clientset:           c.Env.Kube,
		RestConfig:          c.Env.Config,
		ManifestFS:          []fs.FS{&upstream.Manifests},
		Hook:                dumpOnFailure(c.Artifacts),
	}
}
