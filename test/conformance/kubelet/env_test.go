package kubelet

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	defined := map[string]string{"A": "one", "B": "two"}
	tests := []struct{ name, in, want string }{
		{"no reference", "plain", "plain"},
		{"defined", "$(A)-$(B)", "one-two"},
		{"undefined stays", "$(C)/x", "$(C)/x"},
		{"escaped", "$$(A)", "$(A)"},
		{"lone dollar", "cost $5 $", "cost $5 $"},
		{"unterminated", "$(A", "$(A"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := expand(tc.in, defined); got != tc.want {
				t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFieldRef(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a/b": "c"}},
		Spec: corev1.PodSpec{NodeName: "node", ServiceAccountName: "sa"},
	}
	host, ip := netip.MustParseAddr("10.99.255.254"), netip.MustParseAddr("10.244.0.7")
	tests := []struct{ path, want string }{
		{"metadata.name", "p"}, {"metadata.namespace", "ns"}, {"metadata.uid", "u1"},
		{"metadata.labels['app']", "web"}, {"metadata.annotations['a/b']", "c"},
		{"spec.nodeName", "node"}, {"spec.serviceAccountName", "sa"},
		{"status.hostIP", "10.99.255.254"}, {"status.podIP", "10.244.0.7"}, {"status.podIPs", "10.244.0.7"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			got, err := fieldRef(pod, tc.path, host, ip)
			if err != nil || got != tc.want {
				t.Errorf("fieldRef(%s) = %q, %v; want %q", tc.path, got, err, tc.want)
			}
		})
	}
	if _, err := fieldRef(pod, "spec.unknown", host, ip); err == nil {
		t.Error("an unknown field resolved")
	}
}

func TestRewritePath(t *testing.T) {
	mounts, err := mountDirs([]corev1.VolumeMount{
		{Name: "secret", MountPath: "/etc/secret-volume"},
		{Name: "nested", MountPath: "/etc/secret-volume/inner/"},
		{Name: "conf", MountPath: "/root", SubPath: "sub"},
	}, map[string]string{"secret": "/pods/p/volumes/secret", "nested": "/pods/p/volumes/nested", "conf": "/pods/p/volumes/conf"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"/etc/secret-volume/crt", "/pods/p/volumes/secret/crt"},
		{"/etc/secret-volume", "/pods/p/volumes/secret"},
		{"/etc/secret-volume/inner/key", "/pods/p/volumes/nested/key"},
		{"/etc/secret-volumes/crt", "/etc/secret-volumes/crt"},
		{"/root/Corefile", "/pods/p/volumes/conf/sub/Corefile"},
		{"1", "1"},
		{"--token-file=/etc/secret-volume/token", "--token-file=/pods/p/volumes/secret/token"},
		{"--gateway=ns/name", "--gateway=ns/name"},
		{"a=/etc/secret-volume/x", "a=/etc/secret-volume/x"},
	}
	for _, tc := range tests {
		if got := rewritePath(tc.in, mounts); got != tc.want {
			t.Errorf("rewritePath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if _, err := mountDirs([]corev1.VolumeMount{{Name: "missing", MountPath: "/x"}}, nil); err == nil {
		t.Error("a mount of a missing volume was accepted")
	}
}
