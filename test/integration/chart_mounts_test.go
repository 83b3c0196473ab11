package integration

import (
	"path"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The proxies' mounts, as docs/rbac.md documents them (and the proxy's flag defaults).
const (
	documentedTokenFile   = "/var/run/secrets/coxswain/discovery-token/token"
	documentedTrustBundle = "/var/run/secrets/coxswain/trust-bundle/ca.crt"
	discoveryAudience     = "coxswain-discovery"
)

// TestChartProxyMounts: with every values file, the chart's shared proxy pod has no API token
// (automountServiceAccountToken false on the pod and on its ServiceAccount, which no binding
// names), the projected discovery token (audience coxswain-discovery) at
// documentedTokenFile, the trust bundle's ca.crt at documentedTrustBundle, and --token-file and
// --trust-bundle pointing there or left at their defaults, which are those paths.
func TestChartProxyMounts(t *testing.T) {
	for _, values := range chartValueSets(t) {
		var proxy *corev1.PodSpec
		accounts := map[string]*corev1.ServiceAccount{}
		var bound []rbacv1.Subject
		for _, o := range renderChart(t, chartDir, chartKubeVersion, values...) {
			switch o.GetKind() {
			case "Deployment":
				if d := toDeployment(t, o); d.Spec.Template.Spec.Containers[0].Args[0] == "proxy" {
					proxy = &d.Spec.Template.Spec
				}
			case "ServiceAccount":
				var sa corev1.ServiceAccount
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sa); err != nil {
					t.Fatal(err)
				}
				accounts[sa.Name] = &sa
			case "RoleBinding", "ClusterRoleBinding":
				var b rbacv1.RoleBinding // the fields read here are the same in both
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &b); err != nil {
					t.Fatal(err)
				}
				bound = append(bound, b.Subjects...)
			}
		}
		if proxy == nil {
			continue // a values file without the shared pool (dedicated only)
		}
		if proxy.AutomountServiceAccountToken == nil || *proxy.AutomountServiceAccountToken {
			t.Errorf("values %v: the proxy pod automounts an API token", values)
		}
		sa := accounts[proxy.ServiceAccountName]
		if sa == nil || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("values %v: ServiceAccount %q: %+v, want automountServiceAccountToken false", values, proxy.ServiceAccountName, sa)
		}
		for _, s := range bound {
			if s.Kind == "ServiceAccount" && s.Name == proxy.ServiceAccountName {
				t.Errorf("values %v: a binding grants the proxy's ServiceAccount %s RBAC", values, s.Name)
			}
		}
		files := mountedFiles(proxy)
		if v := files[documentedTokenFile]; v == nil || v.Projected == nil || len(v.Projected.Sources) != 1 ||
			v.Projected.Sources[0].ServiceAccountToken == nil || v.Projected.Sources[0].ServiceAccountToken.Audience != discoveryAudience {
			t.Errorf("values %v: %s is not the projected %s token: %+v", values, documentedTokenFile, discoveryAudience, v)
		}
		if v := files[documentedTrustBundle]; v == nil || v.ConfigMap == nil {
			t.Errorf("values %v: %s is not a ConfigMap's ca.crt: %+v", values, documentedTrustBundle, v)
		}
		args := flagValues(proxy.Containers[0].Args)
		for flag, want := range map[string]string{"token-file": documentedTokenFile, "trust-bundle": documentedTrustBundle} {
			if got, set := args[flag]; set && got != want {
				t.Errorf("values %v: --%s=%s, want %s", values, flag, got, want)
			}
			if def := proxyFlagDefault(t, flag); def != want {
				t.Errorf("coxswain proxy --%s defaults to %q, want the documented %s", flag, def, want)
			}
		}
	}
}

// mountedFiles maps each file path the pod's first container sees through a volume item (a
// projected token's path, a ConfigMap's key) to that volume's source.
func mountedFiles(pod *corev1.PodSpec) map[string]*corev1.VolumeSource {
	volumes := map[string]*corev1.VolumeSource{}
	for i := range pod.Volumes {
		volumes[pod.Volumes[i].Name] = &pod.Volumes[i].VolumeSource
	}
	out := map[string]*corev1.VolumeSource{}
	for _, m := range pod.Containers[0].VolumeMounts {
		v := volumes[m.Name]
		if v == nil {
			continue
		}
		switch {
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					out[path.Join(m.MountPath, s.ServiceAccountToken.Path)] = v
				}
			}
		case v.ConfigMap != nil:
			for _, item := range v.ConfigMap.Items {
				if item.Key == "ca.crt" {
					out[path.Join(m.MountPath, item.Path)] = v
				}
			}
		}
	}
	return out
}

// proxyFlagDefault is the default `coxswain proxy -h` prints for flag.
func proxyFlagDefault(t *testing.T, flag string) string {
	t.Helper()
	_, help := runCLI("proxy")
	i := strings.Index(help, "-"+flag+" ")
	if i < 0 {
		t.Fatalf("coxswain proxy -h lists no --%s:\n%s", flag, help)
	}
	entry := help[i+1:]
	if next := strings.Index(entry, "\n  -"); next >= 0 {
		entry = entry[:next]
	}
	m := regexp.MustCompile(`\(default "([^"]*)"\)`).FindStringSubmatch(entry)
	if m == nil {
		t.Fatalf("coxswain proxy -h gives --%s no default: %q", flag, entry)
	}
	return m[1]
}
