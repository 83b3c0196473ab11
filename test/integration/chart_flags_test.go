package integration

import (
	"bytes"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/cmd/coxswaincmd"
	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
)

// chartKubeVersion is the Kubernetes version the renderings below are made for (the integration
// env's kube-apiserver, test/integration/env/build.sh).
const chartKubeVersion = "v1.37.2"

// TestChartFlags parses every container command line the chart renders with the real binary's
// flag sets (the same parsing `coxswain controller|proxy` does, then -h), so a misspelt or removed
// flag, or a value the flag rejects (a bad duration), fails here rather than in a crash-looping
// pod. It also checks the controller's --shared-proxy-selector selects the shared pool's pods,
// and --proxy-image defaults to the chart's image.
func TestChartFlags(t *testing.T) {
	for _, values := range chartValueSets(t) {
		objs := renderChart(t, chartDir, chartKubeVersion, values...)
		var controller, proxy *appsv1.Deployment
		for _, o := range objs {
			if o.GetKind() != "Deployment" {
				continue
			}
			d := toDeployment(t, o)
			c := d.Spec.Template.Spec.Containers[0]
			switch c.Args[0] {
			case "controller":
				controller = d
			case "proxy":
				proxy = d
			default:
				t.Fatalf("%s runs %q", d.Name, c.Args[0])
			}
			parseArgs(t, values, c.Args)
		}
		if controller == nil {
			t.Fatalf("%v: no controller Deployment", values)
		}
		args := flagValues(controller.Spec.Template.Spec.Containers[0].Args)
		if len(values) == 0 {
			if got, want := args["proxy-image"], controller.Spec.Template.Spec.Containers[0].Image; got != want {
				t.Errorf("--proxy-image=%q, want the chart's image %q", got, want)
			}
		}
		if proxy != nil {
			sel, err := labels.Parse(args["shared-proxy-selector"])
			if err != nil {
				t.Fatalf("--shared-proxy-selector: %v", err)
			}
			if !sel.Matches(labels.Set(proxy.Spec.Template.Labels)) {
				t.Errorf("--shared-proxy-selector %q does not select the shared pool's pods %v", sel, proxy.Spec.Template.Labels)
			}
			if sel.Matches(labels.Set(controller.Spec.Template.Labels)) {
				t.Errorf("--shared-proxy-selector %q selects the controller's pods", sel)
			}
		}
	}
}

// TestChartMonitors decodes the chart's PodMonitors and ServiceMonitors strictly into
// prometheus-operator's own types: the stand-in CRDs the dry run uses do not check their specs.
func TestChartMonitors(t *testing.T) {
	objs := renderChart(t, chartDir, chartKubeVersion, "--set", "metrics.podMonitor.enabled=true",
		"--set", "metrics.serviceMonitor.enabled=true")
	kinds := map[string]int{}
	for _, o := range objs {
		var into runtime.Object
		switch o.GetKind() {
		case "PodMonitor":
			into = &monitoringv1.PodMonitor{}
		case "ServiceMonitor":
			into = &monitoringv1.ServiceMonitor{}
		default:
			continue
		}
		kinds[o.GetKind()]++
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Errorf("%s: %v", objectID(o), err)
		}
	}
	if kinds["PodMonitor"] != 2 || kinds["ServiceMonitor"] != 2 {
		t.Errorf("rendered %v, want a PodMonitor and a ServiceMonitor each for the controller and the proxies", kinds)
	}
}

func toDeployment(t *testing.T, o *unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &d, true); err != nil {
		t.Fatalf("%s: %v", objectID(o), err)
	}
	return &d
}

// flagValues maps --name=value arguments to their values (the chart always writes that form).
func flagValues(args []string) map[string]string {
	out := map[string]string{}
	for _, a := range args[1:] {
		if name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			out[name] = value
		}
	}
	return out
}

// parseArgs runs the binary's command line with args and -h, which parses every flag and stops.
func parseArgs(t *testing.T, values, args []string) {
	t.Helper()
	if code, stderr := runCLI(args...); code != 0 {
		t.Errorf("values %v: coxswain %s: exit %d\n%s", values, strings.Join(args, " "), code, stderr)
	}
}

func runCLI(args ...string) (int, string) {
	var stdout, stderr bytes.Buffer
	code := coxswaincmd.Run(append(args, "-h"), &proxycmd.Env{Reg: registry, Stdout: &stdout, Stderr: &stderr})
	return code, stderr.String()
}
