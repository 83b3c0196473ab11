package harness

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/coxswain-labs/coxswain/test/conformance/kubelet"
)

// sharedProxyLabels are the shared pool's pod labels as the chart sets them, which the
// controller's default --shared-proxy-selector selects for every shared Gateway's VIP Service.
var sharedProxyLabels = map[string]string{"app.kubernetes.io/name": "coxswain", "app.kubernetes.io/component": "proxy"}

// The shared pool's mounts, at the paths the chart mounts them.
const (
	tokenMount  = "/var/run/secrets/coxswain/discovery-token"
	bundleMount = "/var/run/secrets/coxswain/trust-bundle"
)

// deploySharedProxy creates the shared proxy pool as the chart's proxy Deployment does (one
// replica: Programmed waits for every connected shared proxy, so more would only slow the
// suite), with its discovery token projected and the trust bundle mounted, and waits until its
// pod is Ready. The kubelet runs the pod from the coxswain binary; the Gateways' VIP Services
// select it, and kube-controller-manager lists it in their EndpointSlices.
func deploySharedProxy(t *testing.T, c *Cluster, discovery string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := c.Env.Kube
	if _, err := kube.CoreV1().ServiceAccounts(coxswainNS).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: proxySA}, AutomountServiceAccountToken: ptr.To(false)},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: proxySA, Namespace: coxswainNS, Labels: sharedProxyLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: sharedProxyLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sharedProxyLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName:           proxySA,
					AutomountServiceAccountToken: ptr.To(false),
					Containers: []corev1.Container{{
						Name:  "proxy",
						Image: ProxyImageRepository + ":e2e",
						Args: []string{"proxy",
							"--discovery-address=" + discovery,
							"--token-file=" + tokenMount + "/token",
							"--trust-bundle=" + bundleMount + "/" + trustBundleKey,
							"--admin-address=:" + strconv.Itoa(kubelet.CoxswainAdminPort),
							"--log-format=console",
						},
						Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "discovery-token", MountPath: tokenMount, ReadOnly: true},
							{Name: "trust-bundle", MountPath: bundleMount, ReadOnly: true},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "discovery-token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
							Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
								Audience: discoveryAud, ExpirationSeconds: ptr.To(int64(proxyTokenHours * 3600)), Path: "token"}}}}}},
						{Name: "trust-bundle", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: trustBundleCM},
							Items:                []corev1.KeyToPath{{Key: trustBundleKey, Path: trustBundleKey}}}}},
					},
				},
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(coxswainNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if done, status := c.Coxswain.exited(); done {
			return false, fmt.Errorf("coxswain exited: %s", status)
		}
		pods, err := kube.CoreV1().Pods(coxswainNS).List(ctx, metav1.ListOptions{
			LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector)})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d pods", len(pods.Items))
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			last += fmt.Sprintf("; %s %s %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("shared proxy pod not Ready: %v (last: %s; logs: %s, pods in %s/pods)", err, last, c.Coxswain.Logs(), c.Artifacts)
	}
}
