package kubelet

import (
	"context"
	"fmt"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// writeStatus writes a running pod's status from its containers' states: Running, Ready when every
// container is, and the pod's address. It reads the pod fresh and retries on conflict.
func (k *Kubelet) writeStatus(rt *podRuntime) {
	ctx, cancel := context.WithTimeout(rt.ctx, apiTimeout)
	defer cancel()
	ns, name := splitKey(rt.key)
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		pod, err := k.cfg.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.UID != rt.uid || pod.DeletionTimestamp != nil {
			return nil
		}
		pod.Status = k.runningStatus(pod, rt)
		_, err = k.cfg.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && rt.ctx.Err() == nil {
		k.log.Warn("writing pod status", zap.String("pod", rt.key), zap.Error(err))
	}
}

func (k *Kubelet) runningStatus(pod *corev1.Pod, rt *podRuntime) corev1.PodStatus {
	states := rt.snapshot()
	allReady := len(states) > 0
	st := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    k.cfg.NodeIP.String(),
		HostIPs:   []corev1.HostIP{{IP: k.cfg.NodeIP.String()}},
		PodIP:     rt.ip.String(),
		PodIPs:    []corev1.PodIP{{IP: rt.ip.String()}},
		StartTime: &metav1.Time{Time: rt.started},
		QOSClass:  pod.Status.QOSClass,
	}
	for _, s := range states {
		allReady = allReady && s.ready
		st.ContainerStatuses = append(st.ContainerStatuses, containerStatus(s))
	}
	now := metav1.Now()
	conds := []corev1.PodCondition{
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: boolCond(allReady)},
		{Type: corev1.PodReady, Status: boolCond(allReady)},
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
	}
	for _, c := range conds {
		c.LastTransitionTime = now
		for _, old := range pod.Status.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		if !allReady && (c.Type == corev1.PodReady || c.Type == corev1.ContainersReady) {
			c.Reason = "ContainersNotReady"
		}
		st.Conditions = append(st.Conditions, c)
	}
	return st
}

func containerStatus(s containerState) corev1.ContainerStatus {
	started := s.running
	cs := corev1.ContainerStatus{
		Name: s.name, Image: s.image, ImageID: s.image, ContainerID: "process://" + s.name,
		Ready: s.ready, Started: &started, RestartCount: s.restarts,
	}
	if s.running {
		cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(s.startedAt)}
	} else {
		cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "the process exited; restarting"}
	}
	if e := s.lastExit; e != nil {
		cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: e.code, Reason: e.reason,
			StartedAt: metav1.NewTime(e.startedAt), FinishedAt: metav1.NewTime(e.finishedAt),
		}
	}
	return cs
}

// setWaiting reports why a pod cannot start yet, once per reason and message (its own status
// write must not wake the pod's sync in a loop).
func (k *Kubelet) setWaiting(ctx context.Context, pod *corev1.Pod, reason, msg string) {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason == reason && w.Message == msg {
			return
		}
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	out := pod.DeepCopy()
	out.Status.Phase = corev1.PodPending
	out.Status.HostIP = k.cfg.NodeIP.String()
	out.Status.HostIPs = []corev1.HostIP{{IP: k.cfg.NodeIP.String()}}
	out.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		})
	}
	if _, err := k.cfg.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil &&
		!apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		k.log.Warn("writing pod status", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(err))
	}
}

func boolCond(b bool) corev1.ConditionStatus {
	if b {
		return corev1.ConditionTrue
	}
	return corev1.ConditionFalse
}

func splitKey(key string) (ns, name string) {
	ns, name, _ = strings.Cut(key, "/")
	return ns, name
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errWaiting}, args...)...)
}
