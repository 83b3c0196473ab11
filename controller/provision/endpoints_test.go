package provision

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestVIPEndpointSlices(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-coxswain", Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "tcp-80", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(20001)},
			{Name: "udp-443", Protocol: corev1.ProtocolUDP, Port: 443, TargetPort: intstr.FromInt32(20002)},
		}},
	}
	pod := func(name string, ready bool, ips ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "coxswain-system", Name: name}, Spec: corev1.PodSpec{NodeName: "n1"}}
		p.Status.Phase = corev1.PodRunning
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		for _, ip := range ips {
			p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
		}
		return p
	}
	terminating := pod("c-terminating", true, "10.0.0.3")
	terminating.DeletionTimestamp = &metav1.Time{}
	failed := pod("d-failed", true, "10.0.0.4")
	failed.Status.Phase = corev1.PodFailed
	pods := []*corev1.Pod{pod("b-unready", false, "10.0.0.2"), pod("a-ready", true, "10.0.0.1", "fd00::1"), terminating, failed, pod("e-no-ip", true)}

	objs := vipEndpointSlices(svc, pods)
	if len(objs) != 2 {
		t.Fatalf("%d slices, want IPv4 and IPv6", len(objs))
	}
	v4, v6 := objs[0].(*discoveryv1.EndpointSlice), objs[1].(*discoveryv1.EndpointSlice)
	if v4.Name != "web-coxswain" || v6.Name != "web-coxswain-ipv6" || v4.AddressType != discoveryv1.AddressTypeIPv4 || v6.AddressType != discoveryv1.AddressTypeIPv6 {
		t.Fatalf("slices %s (%s), %s (%s)", v4.Name, v4.AddressType, v6.Name, v6.AddressType)
	}
	if v4.Labels[discoveryv1.LabelServiceName] != svc.Name || v4.Labels[discoveryv1.LabelManagedBy] != EndpointSliceManager || v4.Labels[LabelManagedBy] != ManagedBy {
		t.Fatalf("labels %v", v4.Labels)
	}
	if len(v4.Ports) != 2 || *v4.Ports[0].Name != "tcp-80" || *v4.Ports[0].Port != 20001 || *v4.Ports[1].Protocol != corev1.ProtocolUDP || *v4.Ports[1].Port != 20002 {
		t.Fatalf("ports %+v, want the target ports named like the Service's", v4.Ports)
	}
	type conds struct{ ready, serving, terminating bool }
	want := map[string]conds{"10.0.0.1": {true, true, false}, "10.0.0.2": {false, false, false}, "10.0.0.3": {false, true, true}}
	if len(v4.Endpoints) != len(want) {
		t.Fatalf("%d IPv4 endpoints, want %d (no failed pod, no pod without an IP)", len(v4.Endpoints), len(want))
	}
	for _, ep := range v4.Endpoints {
		c := ep.Conditions
		if got := (conds{*c.Ready, *c.Serving, *c.Terminating}); got != want[ep.Addresses[0]] {
			t.Errorf("%s: %+v, want %+v", ep.Addresses[0], got, want[ep.Addresses[0]])
		}
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" || *ep.NodeName != "n1" {
			t.Errorf("%s: targetRef %v", ep.Addresses[0], ep.TargetRef)
		}
	}
	if v4.Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Errorf("endpoints not in pod-name order: %v", v4.Endpoints)
	}
	if len(v6.Endpoints) != 1 || v6.Endpoints[0].Addresses[0] != "fd00::1" {
		t.Errorf("IPv6 endpoints %v", v6.Endpoints)
	}

	// No pods: one empty IPv4 slice, "endpoints: []", so that the Service has its slice.
	objs = vipEndpointSlices(svc, nil)
	if len(objs) != 1 || objs[0].(*discoveryv1.EndpointSlice).Endpoints == nil {
		t.Fatalf("no pods: %v", objs)
	}
}
