package integration

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/provision"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// sharedPoolLabels are the shared pool's pod labels, which the default --shared-proxy-selector selects.
var sharedPoolLabels = map[string]string{provision.LabelName: "coxswain", provision.LabelComponent: "proxy"}

// sharedPoolPod creates a shared-pool pod in ns and gives it, as a kubelet would (there is none
// here), a pod IP and a Ready condition.
func sharedPoolPod(t *testing.T, e *env.Env, ns, name, ip string, ready bool) {
	t.Helper()
	proxyPod(t, e, ns, name, sharedPoolLabels)
	setPodStatus(t, e, ns, name, ip, ready)
}

func setPodStatus(t testing.TB, e *env.Env, ns, name, ip string, ready bool) {
	t.Helper()
	pod, err := e.Kube.CoreV1().Pods(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.Now()}}
	if _, err := e.Kube.CoreV1().Pods(ns).UpdateStatus(ctxFor(t), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitVIPEndpoints waits until the EndpointSlice of gw's VIP Service is the controller's, owned
// by gw, at the Service's targetPorts, and lists exactly want (pod IP → ready).
func waitVIPEndpoints(t testing.TB, e *env.Env, gw *gwapiv1.Gateway, want map[string]bool) *discoveryv1.EndpointSlice {
	t.Helper()
	var es *discoveryv1.EndpointSlice
	eventually(t, fmt.Sprintf("EndpointSlice of %s/%s listing %v", gw.Namespace, gw.Name, want), func() error {
		svc, err := e.Kube.CoreV1().Services(gw.Namespace).Get(ctxFor(t), provision.ServiceName(gw), metav1.GetOptions{})
		if err != nil {
			return err
		}
		es, err = e.Kube.DiscoveryV1().EndpointSlices(gw.Namespace).Get(ctxFor(t), svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		return vipEndpointsMatch(es, svc, gw, want)
	})
	return es
}

func vipEndpointsMatch(es *discoveryv1.EndpointSlice, svc *corev1.Service, gw *gwapiv1.Gateway, want map[string]bool) error {
	if err := ownedByGateway(es, gw); err != nil {
		return err
	}
	if err := subset(es.Labels, map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: provision.EndpointSliceManager}); err != nil {
		return err
	}
	if len(svc.Spec.Selector) != 0 {
		return fmt.Errorf("the VIP Service has selector %v; its endpoints are the controller's", svc.Spec.Selector)
	}
	if es.AddressType != discoveryv1.AddressTypeIPv4 {
		return fmt.Errorf("addressType %s", es.AddressType)
	}
	var gotPorts, wantPorts []string
	for _, p := range es.Ports {
		gotPorts = append(gotPorts, fmt.Sprintf("%s %s %d", deref(p.Name), deref(p.Protocol), deref(p.Port)))
	}
	for _, p := range svc.Spec.Ports {
		wantPorts = append(wantPorts, fmt.Sprintf("%s %s %d", p.Name, p.Protocol, p.TargetPort.IntVal))
	}
	sort.Strings(gotPorts)
	sort.Strings(wantPorts)
	if !slices.Equal(gotPorts, wantPorts) {
		return fmt.Errorf("ports %v, want the Service's targetPorts %v", gotPorts, wantPorts)
	}
	got := map[string]bool{}
	for _, ep := range es.Endpoints {
		if len(ep.Addresses) != 1 {
			return fmt.Errorf("endpoint addresses %v", ep.Addresses)
		}
		ready, serving, terminating := deref(ep.Conditions.Ready), deref(ep.Conditions.Serving), deref(ep.Conditions.Terminating)
		if ready != serving || terminating || ep.Conditions.Ready == nil {
			return fmt.Errorf("endpoint %s: ready=%v serving=%v terminating=%v", ep.Addresses[0], ready, serving, terminating)
		}
		if ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
			return fmt.Errorf("endpoint %s: targetRef %v", ep.Addresses[0], ep.TargetRef)
		}
		got[ep.Addresses[0]] = ready
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("endpoints (IP → ready) %v, want %v", got, want)
	}
	return nil
}

// waitVIPEndpointsGone waits until gw's VIP Service's EndpointSlice is deleted.
func waitVIPEndpointsGone(t testing.TB, e *env.Env, gw *gwapiv1.Gateway) {
	t.Helper()
	eventually(t, "EndpointSlice of "+gw.Namespace+"/"+gw.Name+" deleted", func() error {
		_, err := e.Kube.DiscoveryV1().EndpointSlices(gw.Namespace).Get(ctxFor(t), provision.ServiceName(gw), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
