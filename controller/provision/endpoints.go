package provision

import (
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EndpointSliceManager is the endpointslice.kubernetes.io/managed-by value of the EndpointSlices
// the controller writes for its VIP Services (the EndpointSlice controller leaves those alone).
// A label value, so no "/": the EndpointSlice controller's is endpointslice-controller.k8s.io.
const EndpointSliceManager = "controller.coxswain-labs.dev"

// vipEndpointSlices are the EndpointSlices of a VIP Service. The Service has no selector: it
// lives in its Gateway's namespace and the shared pool in the controller's, and a selector only
// selects pods of the Service's own namespace, so the controller publishes the pool's pods itself.
// One slice per address family the pods have (an IPv4 one, maybe empty, when they have none);
// each lists every running pod at the Service's targetPorts, ready while the pod is Ready and not
// terminating, as the EndpointSlice controller would.
func vipEndpointSlices(svc *corev1.Service, pods []*corev1.Pod) []client.Object {
	var ports []discoveryv1.EndpointPort
	for _, p := range svc.Spec.Ports {
		ports = append(ports, discoveryv1.EndpointPort{
			Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(p.TargetPort.IntVal),
		})
	}
	pods = append([]*corev1.Pod(nil), pods...)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	byFamily := map[discoveryv1.AddressType][]discoveryv1.Endpoint{}
	for _, pod := range pods {
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		serving := podReady(pod)
		terminating := pod.DeletionTimestamp != nil
		for _, ip := range podIPs(pod) {
			fam := discoveryv1.AddressTypeIPv4
			if a, err := netip.ParseAddr(ip); err != nil {
				continue
			} else if a.Unmap().Is6() {
				fam = discoveryv1.AddressTypeIPv6
			}
			ep := discoveryv1.Endpoint{
				Addresses: []string{ip},
				Conditions: discoveryv1.EndpointConditions{
					Ready: ptr.To(serving && !terminating), Serving: ptr.To(serving), Terminating: ptr.To(terminating),
				},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			}
			if pod.Spec.NodeName != "" {
				ep.NodeName = ptr.To(pod.Spec.NodeName)
			}
			byFamily[fam] = append(byFamily[fam], ep)
		}
	}
	if len(byFamily) == 0 {
		byFamily[discoveryv1.AddressTypeIPv4] = nil
	}
	var out []client.Object
	for _, fam := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		eps, ok := byFamily[fam]
		if !ok {
			continue
		}
		if eps == nil {
			eps = []discoveryv1.Endpoint{} // "endpoints: []", not null, in the apply request
		}
		name := svc.Name
		if fam == discoveryv1.AddressTypeIPv6 {
			name += "-ipv6"
		}
		labels := map[string]string{}
		for k, v := range svc.Labels {
			labels[k] = v
		}
		labels[discoveryv1.LabelServiceName] = svc.Name
		labels[discoveryv1.LabelManagedBy] = EndpointSliceManager
		out = append(out, &discoveryv1.EndpointSlice{
			TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta:  metav1.ObjectMeta{Namespace: svc.Namespace, Name: name, Labels: labels},
			AddressType: fam,
			Endpoints:   eps,
			Ports:       ports,
		})
	}
	return out
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func podIPs(pod *corev1.Pod) []string {
	var out []string
	for _, ip := range pod.Status.PodIPs {
		if ip.IP != "" {
			out = append(out, ip.IP)
		}
	}
	if len(out) == 0 && pod.Status.PodIP != "" {
		out = append(out, pod.Status.PodIP)
	}
	return out
}
