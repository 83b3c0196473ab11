package kubelet

import (
	"context"
	"fmt"
	"runtime"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// registerNode creates the Node (or takes over one of that name) and marks it Ready, with the
// address and port kube-apiserver uses to reach the kubelet API.
func (k *Kubelet) registerNode(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	nodes := k.cfg.Client.CoreV1().Nodes()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Labels: map[string]string{
			corev1.LabelHostname: k.cfg.NodeName,
			corev1.LabelOSStable: runtime.GOOS, corev1.LabelArchStable: runtime.GOARCH,
		}},
		Spec: corev1.NodeSpec{PodCIDR: k.cfg.Network.Prefix.String(), PodCIDRs: []string{k.cfg.Network.Prefix.String()}},
	}
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("registering node %s: %w", k.cfg.NodeName, err)
	}
	created.Status = k.nodeStatus()
	if _, err := nodes.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("node %s status: %w", k.cfg.NodeName, err)
	}
	return nil
}

func (k *Kubelet) nodeStatus() corev1.NodeStatus {
	now := metav1.Now()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(fmt.Sprint(runtime.NumCPU())),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "process kubelet is posting ready status"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", ""),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", ""),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", ""),
		},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: k.cfg.NodeIP.String()}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(k.cfg.Port)}},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion: "v1.37.2-process", OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
			ContainerRuntimeVersion: "process://local",
		},
	}
}
