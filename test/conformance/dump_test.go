package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/yaml"
)

// dumpOnFailure is the suite's per-test hook: when a test failed, it writes the objects it is
// likely about (Gateway API objects, Services, EndpointSlices, Pods) to
// <artifacts>/failures/<test>.yaml. The suite calls it after the test's own manifests are
// deleted, so it shows the base objects (Gateways, backends) rather than the test's routes.
func dumpOnFailure(artifacts string) func(*testing.T, suite.ConformanceTest, *suite.ConformanceTestSuite) {
	return func(t *testing.T, test suite.ConformanceTest, s *suite.ConformanceTestSuite) {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dir := filepath.Join(artifacts, "failures")
		path := filepath.Join(dir, test.ShortName+".yaml")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Logf("dump: %v", err)
			return
		}
		var out []byte
		for _, list := range []client.ObjectList{
			&gwapiv1.GatewayClassList{}, &gwapiv1.GatewayList{}, &gwapiv1.HTTPRouteList{}, &gwapiv1.GRPCRouteList{},
			&gwapiv1.TLSRouteList{}, &gwapiv1.TCPRouteList{}, &gwapiv1.UDPRouteList{}, &gwapiv1b1.ReferenceGrantList{},
			&corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &corev1.PodList{},
		} {
			if err := s.Client.List(ctx, list); err != nil {
				out = fmt.Appendf(out, "# listing %T: %v\n", list, err)
				continue
			}
			b, err := yaml.Marshal(list)
			if err != nil {
				out = fmt.Appendf(out, "# encoding %T: %v\n", list, err)
				continue
			}
			out = fmt.Appendf(out, "# %T\n%s---\n", list, b)
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Logf("dump: %v", err)
			return
		}
		t.Logf("cluster state after the failure: %s", path)
	}
}
